"""Solution-marker parsing and stripping (cs336_staff/markers.py): the edge cases, each by name."""

from __future__ import annotations

import ast
import textwrap

import pytest

from cs336_staff.markers import (
    MarkerError,
    find_regions,
    is_staff_only,
    strip_source,
    strip_staff_only,
)

pytestmark = pytest.mark.staff


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


GOOD = src(
    '''
    """Module."""
    import math


    class Linear:
        def forward(self, x):
            """Apply the layer."""
            scale = 2
            # BEGIN SOLUTION
            y = x * scale
            if y > 0:
                return math.sqrt(y)
            return y
            # END SOLUTION


    def helper(x):
        return x


    def whole(x):
        # BEGIN SOLUTION
        return x + 1
        # END SOLUTION
    '''
)


def test_strip_replaces_each_region_by_a_stub_naming_function_and_file():
    """Each region becomes one `raise NotImplementedError("Implement <qualname> in <file>")` at its indentation."""
    out, regions = strip_source(GOOD, "cs336_assignment/models.py")
    assert [r.qualname for r in regions] == ["Linear.forward", "whole"]
    assert (
        '        raise NotImplementedError("Implement Linear.forward in cs336_assignment/models.py")\n'
        in out
    )
    assert '    raise NotImplementedError("Implement whole in cs336_assignment/models.py")\n' in out
    assert "BEGIN SOLUTION" not in out and "math.sqrt" not in out and "y = x * scale" not in out


def test_strip_keeps_everything_outside_regions_byte_for_byte():
    """Signatures, docstrings, code before a region and helpers outside regions survive unchanged."""
    out, _ = strip_source(GOOD, "m.py")
    assert '"""Apply the layer."""\n        scale = 2\n        raise' in out
    assert "def helper(x):\n    return x\n" in out
    assert out.startswith('"""Module."""\nimport math\n')
    ast.parse(out)


def test_strip_is_identity_without_markers():
    """A file without markers comes back as is, with no regions."""
    text = src("def f():\n    return 1\n")
    assert strip_source(text, "m.py") == (text, [])


def test_markers_inside_strings_and_docstrings_are_not_markers():
    """Only comment tokens count: the marker text inside a string or docstring is left alone."""
    text = src(
        '''
        def f():
            """Example:
            # BEGIN SOLUTION
            """
            return "# END SOLUTION"
        '''
    )
    assert find_regions(text, "m.py") == []


def test_several_regions_in_one_function_are_numbered():
    """Two regions of one function get "(part 1 of 2)" and "(part 2 of 2)" in their messages."""
    text = src(
        """
        def f(x):
            # BEGIN SOLUTION
            y = x
            # END SOLUTION
            z = 1
            # BEGIN SOLUTION
            return y + z
            # END SOLUTION
        """
    )
    out, regions = strip_source(text, "m.py")
    assert [r.message("m.py") for r in regions] == [
        "Implement f (part 1 of 2) in m.py",
        "Implement f (part 2 of 2) in m.py",
    ]


def test_nested_function_and_async_method_qualnames():
    """Qualnames follow classes and enclosing functions, and async functions count as functions."""
    text = src(
        """
        class A:
            async def run(self):
                def inner():
                    # BEGIN SOLUTION
                    return 1
                    # END SOLUTION
                return inner
        """
    )
    assert [r.qualname for r in find_regions(text, "m.py")] == ["A.run.inner"]


def test_region_with_try_except_and_with_blocks_is_one_region():
    """Statements nested in try/except/with blocks belong to the region's top-level statement."""
    text = src(
        """
        def f(path):
            # BEGIN SOLUTION
            try:
                with open(path) as fh:
                    data = fh.read()
            except OSError:
                data = ""
            return data
            # END SOLUTION
        """
    )
    (region,) = find_regions(text, "m.py")
    assert len(region.statements) == 2


BAD = {
    "unmatched_end": (
        "def f():\n    return 1\n    # END SOLUTION\n",
        3,
        "unmatched '# END SOLUTION'",
    ),
    "unmatched_begin": (
        "def f():\n    # BEGIN SOLUTION\n    return 1\n",
        2,
        "unmatched '# BEGIN SOLUTION'",
    ),
    "nested": (
        "def f():\n    # BEGIN SOLUTION\n    x = 1\n    # BEGIN SOLUTION\n    return x\n    # END SOLUTION\n    # END SOLUTION\n",
        4,
        "nested",
    ),
    "module_level": ("# BEGIN SOLUTION\nX = 1\n# END SOLUTION\n", 1, "at module level"),
    "class_level": (
        "class A:\n    # BEGIN SOLUTION\n    x = 1\n    # END SOLUTION\n",
        2,
        "at class level",
    ),
    "inside_if_block": (
        "def f(a):\n    if a:\n        # BEGIN SOLUTION\n        return 1\n        # END SOLUTION\n    return 0\n",
        3,
        r"inside a block \(the if at line 2\)",
    ),
    "indented_deeper_than_body": (
        "def f():\n        # BEGIN SOLUTION\n    return 1\n        # END SOLUTION\n",
        2,
        "column 8",
    ),
    "begin_and_end_at_different_columns": (
        "def f():\n    # BEGIN SOLUTION\n    return 1\n  # END SOLUTION\n",
        4,
        "column 2",
    ),
    "end_cuts_through_a_block": (
        "def f(a):\n    # BEGIN SOLUTION\n    x = 1\n    if a:\n        x = 2\n    # END SOLUTION\n        x = 3\n    return x\n",
        6,
        "statement at line 5 is not in it",
    ),
    "end_cuts_through_a_block_header": (
        "def f(a):\n    # BEGIN SOLUTION\n    x = 1\n    if a:\n    # END SOLUTION\n        x = 3\n    return x\n",
        5,
        "cuts through the statement at line 4",
    ),
    "empty_region": (
        "def f():\n    x = 1\n    # BEGIN SOLUTION\n    # a comment only\n    # END SOLUTION\n    return x\n",
        3,
        "empty region",
    ),
    "region_holds_the_docstring": (
        'def f():\n    # BEGIN SOLUTION\n    """Doc."""\n    return 1\n    # END SOLUTION\n',
        2,
        "docstring",
    ),
    "marker_after_code_on_a_line": (
        "def f():\n    return 1  # BEGIN SOLUTION\n",
        2,
        "shares its line",
    ),
    "misspelled_marker": (
        "def f():\n    #BEGIN SOLUTION\n    return 1\n    # END SOLUTION\n",
        2,
        "malformed marker",
    ),
    "lowercase_marker": (
        "def f():\n    # begin solution\n    return 1\n    # END SOLUTION\n",
        2,
        "malformed marker",
    ),
    "region_spans_two_functions": (
        "def f():\n    # BEGIN SOLUTION\n    return 1\n\ndef g():\n    return 2\n    # END SOLUTION\n",
        7,
        "runs out of its body",
    ),
    "code_after_the_last_region": (
        "def f(x):\n    # BEGIN SOLUTION\n    y = x\n    # END SOLUTION\n    return x\n",
        5,
        "would follow the stub's",
    ),
    "name_defined_only_in_region_used_after": (
        "def f(x):\n    # BEGIN SOLUTION\n    out = x + 1\n    # END SOLUTION\n    return out\n",
        5,
        "'out' is defined only inside the region",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_markers_fail_loudly_with_file_and_line(case):
    """Every malformed, unmatched, nested or misplaced marker raises MarkerError naming file:line."""
    text, line, words = BAD[case]
    with pytest.raises(MarkerError, match=words) as info:
        strip_source(text, "cs336_assignment/x.py")
    assert (info.value.path, info.value.line) == ("cs336_assignment/x.py", line), str(info.value)
    assert str(info.value).startswith("cs336_assignment/x.py:")


def test_name_used_after_region_is_fine_when_also_defined_outside():
    """A name the region assigns but the kept code between two regions also defines (or the module does) is no error."""
    text = (
        "import os\n\ndef f(x):\n    out = 0\n    # BEGIN SOLUTION\n    out = x\n    path = os.sep\n    # END SOLUTION\n"
        "    pair = out, os\n    # BEGIN SOLUTION\n    return pair\n    # END SOLUTION\n"
    )
    assert len(find_regions(text, "m.py")) == 2


def test_code_between_two_regions_is_fine_but_not_after_the_last():
    """Given code may sit between part 1 and part 2 (it runs once part 1 is written), not after the last stub."""
    ok = "def f(x):\n    # BEGIN SOLUTION\n    y = x\n    # END SOLUTION\n    z = 1\n    # BEGIN SOLUTION\n    return y + z\n    # END SOLUTION\n"
    assert len(find_regions(ok, "m.py")) == 2
    with pytest.raises(
        MarkerError,
        match=r"code after the last region of f .*move it into the region .* or above it",
    ):
        find_regions(
            ok.replace(
                "    return y + z\n    # END SOLUTION\n",
                "    w = y + z\n    # END SOLUTION\n    return x\n",
            ),
            "m.py",
        )


def test_staff_only_file_detection_looks_at_the_first_lines_only():
    """A `# STAFF-ONLY` comment in the first three lines marks a file; later ones (like cli.py's) do not."""
    assert is_staff_only("# STAFF-ONLY: grading helper\nx = 1\n")
    assert is_staff_only('#!/bin/sh\n"""doc"""\n# STAFF-ONLY\n')
    assert not is_staff_only("x = 1\ny = 2\nz = 3\n# STAFF-ONLY below\n")


def test_staff_only_blocks_are_dropped_and_unmatched_ones_fail():
    """Lines between BEGIN/END STAFF-ONLY go away without a stub; an unmatched block names its line."""
    text = "a = 1\n# BEGIN STAFF-ONLY\nsecret = 2\n# END STAFF-ONLY\nb = 3\n"
    assert strip_staff_only(text, "f.py") == "a = 1\nb = 3\n"
    with pytest.raises(MarkerError, match=r"f\.py:2: unmatched"):
        strip_staff_only("a = 1\n# BEGIN STAFF-ONLY\n", "f.py")
