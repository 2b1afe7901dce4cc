"""What a student reads on a first ``uv run pytest``: short, not misleading, the per-part table last.

The ``output`` check of ``cs336 release --check`` reads what the stub run printed (the handout as
shipped, run as students run it, without ``-q``):

    short        at most ``MAX_LINES`` lines (a stub's traceback used to reprint its whole
                 docstring: 29,213 lines)
    not written  every failure and error section is the one line ``tests/not_written.py`` writes
                 for a test that reached a stub: no test tells a student who has not written a
                 function yet about some other mistake
    table last   the per-part table (``tests/progress.py``) is the last thing printed, after
                 pytest's short summary and final counts
"""

from __future__ import annotations

import re

from cs336_staff.release.results import Check
from tests.not_written import NOT_WRITTEN

#: The most lines the stubs' output may have (issue 22: "under 5,000 lines on the stubs").
MAX_LINES = 5000

TABLE_TITLE = "public progress by part (points)"
# "____ test_a ____", or "_ test_a _" when its name is long
_SECTION = re.compile(r"^_+ (.*[^_ ].*?) _+$")
_BANNER = re.compile(r"^={3,} (.+?) ={3,}$")


def sections(output: str) -> list[tuple[str, str]]:
    """Each failure or error section of pytest's output: (its title, its body stripped), in order.

    >>> out = "=== FAILURES ===\\n____ test_a ____\\nnot written yet: Implement f in m.py\\n=== short test summary info ==="
    >>> sections(out)
    [('test_a', 'not written yet: Implement f in m.py')]
    """
    found: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    inside = False
    for line in output.splitlines():
        banner = _BANNER.match(line)
        if banner:
            inside = banner.group(1) in ("FAILURES", "ERRORS")
            current = None
            continue
        title = _SECTION.match(line) if inside else None
        if title:
            current = []
            found.append((title.group(1), current))
        elif current is not None:
            current.append(line)
    return [(title, "\n".join(body).strip()) for title, body in found]


def problems(output: str, *, table: bool = True, not_written: bool = True) -> list[str]:
    """What is wrong with the stubs' output, one line each (empty: nothing). ``table`` and
    ``not_written``: whether the handout ships the plugins that print the table and the one-line
    reports (a handout without them is held to the line count only).

    >>> problems("=== FAILURES ===\\n__ test_a __\\nnot written yet: Implement f in m.py\\n=== 1 failed ===\\n"
    ...          "=== public progress by part (points) ===\\npart passed\\ntotal 0.0/10")
    []
    """
    out = []
    lines = output.rstrip().splitlines()
    if len(lines) > MAX_LINES:
        out.append(
            f"the stubs' output has {len(lines)} lines, more than {MAX_LINES}: shorten what a stub's failure prints"
        )
    for title, body in sections(output) if not_written else []:
        report = body.split("\n-", 1)[
            0
        ].strip()  # what the test reported, before any "--- Captured ..." output
        if not report.startswith(NOT_WRITTEN) or "\n" in report:
            first = report.splitlines()[0] if report else "(empty)"
            out.append(
                f"{title}: reported as {first!r}, not as a function not written yet (tests/not_written.py)"
            )
    tables = [i for i, line in enumerate(lines) if TABLE_TITLE in line]
    if table and not tables:
        out.append(f"no per-part table ({TABLE_TITLE!r}) in the stubs' output")
    elif table:
        after = lines[tables[-1] + 1 :]
        banners = [line for line in after if _BANNER.match(line) or _SECTION.match(line)]
        if banners:
            out.append(
                f"the per-part table is not the last thing printed: {banners[0]!r} comes after it"
            )
    return out


#: The handout's plugins that the table and the one-line reports come from.
PROGRESS_PLUGIN, NOT_WRITTEN_PLUGIN = "tests/progress.py", "tests/not_written.py"


def check_output(output: str, shipped: list[str]):  # noqa: ANN201 - a release Check (imported late: check.py imports this module)

    found = problems(
        output, table=PROGRESS_PLUGIN in shipped, not_written=NOT_WRITTEN_PLUGIN in shipped
    )
    if found:
        return Check(
            "output",
            False,
            f"{len(found)} problems with what a student reads on the stubs",
            found[:50],
        )
    n = len(output.rstrip().splitlines())
    return Check(
        "output",
        True,
        f"the stubs print {n} lines (at most {MAX_LINES}), each failure as a function not "
        "written yet, the per-part table last",
    )
