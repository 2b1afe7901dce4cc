"""The rules check (tests/rules.py): each way of delegating and each way of reaching the tests is
found and costs the tests that reach it; the reference and the handout's given code draw nothing;
a name only imported at module level costs nothing; a local run says so in the rule's words."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cs336_staff import rules_docs
from cs336_staff.grade import delegation
from tests.rules import (
    ALL_PARTS,
    Program,
    _module_code,
    check_sources,
    fingerprint,
    load_rules,
    read_tree,
)

pytestmark = pytest.mark.staff

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = read_tree(ROOT)
BOOK = load_rules()
TAMPERING = "no-reaching-the-tests"


def patched(
    path: str, old: str, new: str, *, append: str = "", files: dict[str, str] | None = None
) -> dict[str, str]:
    """The reference (or ``files``) with ``old`` replaced by ``new`` (once, and it must be there) in ``path``."""
    files = dict(files or REFERENCE)
    assert old in files[path], f"{old!r} is no longer in {path}; update this test's case"
    files[path] = files[path].replace(old, new, 1) + append
    return files


def inserted(path: str, after: str, code: str, imports: str = "") -> dict[str, str]:
    """The reference with ``code`` (indented as it must be) right after the line ``after`` (there once)
    of ``path``, and ``imports`` at the top of that file."""
    assert REFERENCE[path].count(after) == 1, (
        f"{after!r} is not once in {path}; update this test's case"
    )
    files = patched(path, after, after + code)
    return patched(
        path,
        "from __future__ import annotations\n",
        f"from __future__ import annotations\n{imports}",
        files=files,
    )


def as_bytes(files: dict[str, str]) -> dict[str, bytes]:
    return {k: v.encode() for k, v in files.items()}


OPTIM, MODELS, FLOPS = (
    "cs336_assignment/optim.py",
    "cs336_assignment/models.py",
    "cs336_assignment/accounting/flop_counter.py",
)
TRAIN, DATA, CLI = (
    "cs336_assignment/tokenization/train.py",
    "cs336_assignment/data.py",
    "cs336_assignment/cli.py",
)
IN_ADAM = (
    OPTIM,
    "        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)\n",
)  # Adam.__init__
IN_GET_BATCH = (DATA, "    x = torch.from_numpy(windows[:, :-1].copy())\n")
LINEAR_PRODUCT = '        return einsum(x, self.weight, "... d_in, d_out d_in -> ... d_out")\n'
IN_COUNT_FLOPS = "    with FlopCounter() as counter:"

CASES = {
    # the three of the integrity issue
    "adam-subclasses-torch-adam": (
        patched(OPTIM, "class Adam(torch.optim.Optimizer):", "class Adam(torch.optim.Adam):"),
        "get_adam_cls",
        "no-torch-optimizers",
        "torch.optim.Adam",
    ),
    "linear-forward-calls-functional-linear": (
        patched(
            MODELS,
            "from torch import Tensor, nn\n",
            "from torch import Tensor, nn\nfrom torch.nn import functional as F\n",
            append="\n\ndef _apply(layer, x):\n    return F.linear(x, layer.weight)\n\n\nLinear.forward = _apply\n",
        ),
        "get_linear_cls",
        "no-library-linear",
        "torch.nn.functional.linear",
    ),
    "count-flops-on-flop-counter-mode": (
        patched(
            FLOPS,
            IN_COUNT_FLOPS,
            "    with torch.utils.flop_counter.FlopCounterMode(display=False) as counter:",
        ),
        "run_count_flops",
        "no-flop-counter-library",
        "torch.utils.flop_counter.FlopCounterMode",
    ),
    # other spellings of delegation
    "adapter-returns-torch-adamw": (
        patched("adapters.py", "    return optim.AdamW\n", "    return torch.optim.AdamW\n"),
        "get_adamw_cls",
        "no-torch-optimizers",
        "torch.optim.AdamW",
    ),
    "alias-from-import-as": (
        patched(
            OPTIM,
            "class SGD(torch.optim.Optimizer):",
            "class SGD(_Base):",
            append="\nfrom torch.optim import SGD as _TorchSGD\n_Base = _TorchSGD\n",
        ),
        "get_sgd_cls",
        "no-torch-optimizers",
        "torch.optim.SGD",
    ),
    "getattr-with-a-literal-name": (
        patched(
            OPTIM,
            "class RMSProp(torch.optim.Optimizer):",
            'class RMSProp(getattr(torch.optim, "RMSprop")):',
        ),
        "get_rmsprop_cls",
        "no-torch-optimizers",
        "torch.optim.RMSprop",
    ),
    "tokenizer-library-in-a-helper-of-another-module": (
        {
            **patched(
                TRAIN,
                "    special_tokens = check_special_tokens(special_tokens)\n",
                "    special_tokens = check_special_tokens(special_tokens)\n    _peek(input_path)\n",
                append="\nfrom .helpers import peek as _peek\n",
            ),
            "cs336_assignment/tokenization/helpers.py": "import tiktoken as tk\n\n\ndef peek(path):\n    return tk.get_encoding('gpt2')\n",
        },
        "run_train_bpe",
        "no-tokenizer-library",
        "tiktoken.get_encoding",
    ),
    "grad-scaler": (
        patched(
            "cs336_assignment/precision/loss_scaling.py",
            "from torch import Tensor\n",
            "from torch import Tensor\nfrom torch.amp import GradScaler\n",
            append="\n\nDynamicLossScaler = GradScaler\n",
        ),
        "get_loss_scaler_cls",
        "no-library-grad-scaler",
        "torch.amp.GradScaler",
    ),
    # library internals (the third hostile round): private entry points and fused kernels
    "fused-adamw-kernel": (
        inserted(*IN_ADAM, "        self._kernel = torch._fused_adamw_\n"),
        "get_adam_cls",
        "no-torch-optimizers",
        "._fused_adamw_",
    ),
    "fused-adam-kernel-through-torch-ops": (
        inserted(*IN_ADAM, "        self._kernel = torch.ops.aten._fused_adam_.default\n"),
        "get_adam_cls",
        "no-torch-optimizers",
        "._fused_adam_",
    ),
    "fused-kernel-named-in-getattr": (
        inserted(*IN_ADAM, '        self._kernel = getattr(torch._VF, "_fused_adamw_")\n'),
        "get_adam_cls",
        "no-torch-optimizers",
        "._fused_adamw_",
    ),
    "aten-linear": (
        patched(MODELS, LINEAR_PRODUCT, "        return torch.ops.aten.linear(x, self.weight)\n"),
        "get_linear_cls",
        "no-library-linear",
        "torch.ops.aten.linear",
    ),
    "c-nn-linear": (
        patched(MODELS, LINEAR_PRODUCT, "        return torch._C._nn.linear(x, self.weight)\n"),
        "get_linear_cls",
        "no-library-linear",
        "torch._C._nn.linear",
    ),
    "einops-einmix": (
        patched(
            MODELS,
            LINEAR_PRODUCT,
            "        return einops.layers.torch.EinMix('b i -> b o', weight_shape='i o', i=2, o=2)(x)\n",
            append="\nimport einops.layers.torch\n",
        ),
        "get_linear_cls",
        "no-library-linear",
        "einops.layers.torch.EinMix",
    ),
    "flops-from-the-profiler": (
        patched(
            FLOPS, IN_COUNT_FLOPS, "    with torch.profiler.profile(with_flops=True) as counter:"
        ),
        "run_count_flops",
        "no-flop-counter-library",
        "torch.profiler.profile",
    ),
    "flops-from-the-autograd-profiler": (
        patched(
            FLOPS,
            IN_COUNT_FLOPS,
            "    with torch.autograd.profiler.profile(with_flops=True) as counter:",
        ),
        "run_count_flops",
        "no-flop-counter-library",
        "torch.autograd.profiler.profile",
    ),
    "rustbpe-trains-the-merges": (
        patched(
            TRAIN,
            "    special_tokens = check_special_tokens(special_tokens)\n",
            "    special_tokens = check_special_tokens(special_tokens)\n    rustbpe.Tokenizer()\n",
            append="\nimport rustbpe\n",
        ),
        "run_train_bpe",
        "no-tokenizer-library",
        "rustbpe.Tokenizer",
    ),
}

#: Ways to reach the tests or the interpreter's insides: (files, an adapter that reaches it, the api named).
TAMPERING_CASES = {
    "frames-through-sys-getframe": (
        inserted(*IN_ADAM, "        _caller = sys._getframe(1).f_back.f_locals\n", "import sys\n"),
        "get_adam_cls",
        "sys._getframe",
    ),
    "frame-attributes": (
        inserted(*IN_ADAM, "        _caller = sys._getframe(1).f_back.f_locals\n", "import sys\n"),
        "get_adam_cls",
        ".f_locals",
    ),
    "frames-through-inspect": (
        inserted(*IN_ADAM, "        _frame = inspect.currentframe()\n", "import inspect\n"),
        "get_adam_cls",
        "inspect.currentframe",
    ),
    "a-tracebacks-frame": (
        inserted(
            *IN_GET_BATCH,
            "    try:\n        raise RuntimeError\n    except RuntimeError as e:\n"
            "        _frame = e.__traceback__.tb_frame\n",
        ),
        "run_get_batch",
        ".tb_frame",
    ),
    "a-frame-attribute-named-in-getattr": (
        inserted(*IN_GET_BATCH, '    _up = getattr(_f, "f_back")\n'),
        "run_get_batch",
        ".f_back",
    ),
    "attrgetter-with-a-literal-path": (
        inserted(
            *IN_GET_BATCH,
            '    _up = operator.attrgetter("f_back.f_globals")\n',
            "import operator\n",
        ),
        "run_get_batch",
        ".f_globals",
    ),
    "the-tests-modules": (
        inserted(
            *IN_ADAM,
            "        _drive.trajectory = None\n",
            "import tests.scenarios.optim as _drive\n",
        ),
        "get_adam_cls",
        "tests.scenarios.optim.trajectory",
    ),
    "the-tests-imported-by-a-literal-name": (
        inserted(
            *IN_GET_BATCH,
            '    importlib.import_module("tests.scenarios.data")\n',
            "import importlib\n",
        ),
        "run_get_batch",
        "tests.scenarios.data",
    ),
    "an-import-by-a-computed-name": (
        inserted(
            *IN_GET_BATCH,
            '    importlib.import_module("te" + "sts.scenarios.data")\n',
            "import importlib\n",
        ),
        "run_get_batch",
        "a module by a computed name",
    ),
    "dunder-import-by-a-computed-name": (
        inserted(*IN_GET_BATCH, '    __import__(os.environ["X"])\n'),
        "run_get_batch",
        "a module by a computed name",
    ),
    "an-import-function-as-a-value": (
        inserted(*IN_GET_BATCH, "    _load = importlib.import_module\n", "import importlib\n"),
        "run_get_batch",
        "a module by a computed name",
    ),
    "sys-modules": (
        inserted(*IN_GET_BATCH, '    _m = sys.modules["tests.scenarios.data"]\n', "import sys\n"),
        "run_get_batch",
        "sys.modules",
    ),
    "gc-referrers": (
        inserted(*IN_GET_BATCH, "    _r = gc.get_referrers(dataset)\n", "import gc\n"),
        "run_get_batch",
        "gc.get_referrers",
    ),
    "a-functions-globals": (
        inserted(*IN_ADAM, "        _g = _evaluate.__globals__\n"),
        "get_adam_cls",
        ".__globals__",
    ),
    "a-functions-code-replaced": (
        inserted(*IN_ADAM, "        _evaluate.__code__ = (lambda c: None).__code__\n"),
        "get_adam_cls",
        ".__code__",
    ),
    "exec": (inserted(*IN_GET_BATCH, '    exec("import tests")\n'), "run_get_batch", "exec"),
    "eval": (inserted(*IN_GET_BATCH, '    eval("1")\n'), "run_get_batch", "eval"),
    "compile": (
        inserted(*IN_GET_BATCH, '    compile("1", "f", "eval")\n'),
        "run_get_batch",
        "compile",
    ),
    "builtins": (
        inserted(*IN_GET_BATCH, "    builtins.len = len\n", "import builtins\n"),
        "run_get_batch",
        "builtins.len",
    ),
    "a-trace-function": (
        inserted(*IN_GET_BATCH, "    sys.settrace(None)\n", "import sys\n"),
        "run_get_batch",
        "sys.settrace",
    ),
    "an-import-hook": (
        inserted(*IN_GET_BATCH, "    sys.meta_path.insert(0, None)\n", "import sys\n"),
        "run_get_batch",
        "sys.meta_path.insert",
    ),
    "ctypes": (
        inserted(*IN_GET_BATCH, "    _api = ctypes.pythonapi\n", "import ctypes\n"),
        "run_get_batch",
        "ctypes.pythonapi",
    ),
    "patching-a-library": (
        inserted(*IN_GET_BATCH, "    torch.from_numpy = torch.as_tensor\n"),
        "run_get_batch",
        "torch.from_numpy",
    ),
    "patching-a-library-through-setattr": (
        inserted(*IN_GET_BATCH, '    setattr(np, "arange", None)\n'),
        "run_get_batch",
        "numpy.arange",
    ),
    "patching-a-library-through-its-dict": (
        inserted(*IN_GET_BATCH, '    torch.__dict__["stack"] = None\n'),
        "run_get_batch",
        "torch",
    ),
    "patching-a-library-through-vars": (
        inserted(*IN_GET_BATCH, '    vars(torch)["stack"] = None\n'),
        "run_get_batch",
        "torch",
    ),
    "patching-through-a-local-alias": (
        inserted(*IN_GET_BATCH, "    t = torch\n    t.stack = None\n"),
        "run_get_batch",
        "torch.stack",
    ),
}


def test_the_rules_file_reads_and_names_every_part() -> None:
    """tests/rules.toml: every part of the rubric has its `may_use`, every rule its home part (or all)."""
    import tomllib

    parts = list(tomllib.loads((ROOT / "rubric.toml").read_text())["concepts"])
    assert sorted(BOOK.may_use) == sorted(parts), (
        "tests/rules.toml needs one [parts.KEY] per rubric concept"
    )
    assert {r.part for r in BOOK.rules} <= {*parts, ALL_PARTS}
    assert all((r.forbidden or r.attributes) and r.says for r in BOOK.rules)


def test_the_reference_obeys_the_rules() -> None:
    """No adapter of the reference reaches a forbidden API or a construct for a person to read, in a
    local run or in grading; grading leaves no rules note."""
    report = check_sources(REFERENCE)
    assert not report.errors, report.errors
    assert not report.violations, "\n".join(v.message() for v in report.violations)
    assert not report.suspicious, "\n".join(s.message() for s in report.suspicious)
    graded = delegation.check_submission(as_bytes(REFERENCE), ROOT)
    assert not graded.violations and not graded.suspicious and delegation.notes(graded) == [], (
        delegation.notes(graded)
    )


def test_the_handouts_given_code_draws_nothing_locally_or_graded() -> None:
    """The handout as the release makes it (solution regions stubbed, staff-only code dropped) draws
    no violation and no remark: the `cs336` command's import by name is given code."""
    handout = rules_docs.handout_of(REFERENCE, BOOK)
    assert handout.drawn.get(CLI), (
        "the given cli.py no longer draws anything: update this test and tests/rules.toml's [[given]]"
    )
    for report in (
        check_sources(handout.texts),
        delegation.check_submission(as_bytes(handout.texts), ROOT),
    ):
        assert not report.violations and not report.suspicious, [
            *report.violations,
            *report.suspicious,
        ]


def test_given_code_is_exempt_only_while_unchanged() -> None:
    """cli.py reformatted and commented stays given; a change to its code makes its import by a
    computed name the student's: every test loses its points, locally and graded."""
    reformatted = patched(
        CLI,
        "    module = importlib.import_module(commands[name][0])\n",
        "    # the subcommand's module\n    module = importlib.import_module(\n        commands[name][0]\n    )\n",
    )
    for files in (reformatted, {**REFERENCE, CLI: REFERENCE[CLI].replace("\n", "\r\n")}):
        assert (
            not check_sources(files).violations
            and not delegation.check_submission(as_bytes(files), ROOT).violations
        )
    changed = patched(
        CLI, "    name, rest = argv[0], argv[1:]\n", "    name, rest = argv[0].lower(), argv[1:]\n"
    )
    for report in (check_sources(changed), delegation.check_submission(as_bytes(changed), ROOT)):
        found = [v for v in report.by_adapter().get("run_cs336", []) if v.rule.id == TAMPERING]
        assert (
            found
            and found[0].api == "a module by a computed name"
            and found[0].where.startswith(CLI)
        ), report.violations
    notes = delegation.notes(delegation.check_submission(as_bytes(changed), ROOT))
    assert any("cli.py" in n and "no test of this submission earns points" in n for n in notes), (
        notes
    )


def screened(files: dict[str, str]) -> tuple[list, list, list, list[str]]:
    """Everything the graded rules screen says of ``files``: each violation with its path, each
    remark, each error, and the results' notes."""
    report = delegation.check_submission(as_bytes(files), ROOT)
    return (
        [
            (v.adapter, v.rule.id, v.api, v.where, v.function, v.how, v.path)
            for v in report.violations
        ],
        [(s.adapter, s.what, s.where, s.function) for s in report.suspicious],
        report.errors,
        delegation.notes(report),
    )


def test_a_screen_that_keeps_unchanged_files_finds_what_a_fresh_one_finds() -> None:
    """A grader's process keeps what the screen read of each file, by its text (``tests.rules``'
    ``_module_code``; delegation's given spans), for the next submission of its batch. On the
    reference, submissions breaking a rule in Adam (by subclassing, by walking frames) and one
    changing given code (cli.py), each screened after the others, in both orders, finds exactly
    what a screen with nothing kept finds; a changed file is read again, and only it."""
    submissions = {
        "reference": REFERENCE,
        "adam-subclasses-torch-adam": CASES["adam-subclasses-torch-adam"][0],
        "frames-through-sys-getframe": TAMPERING_CASES["frames-through-sys-getframe"][0],
        "given-cli-changed": patched(
            CLI,
            "    name, rest = argv[0], argv[1:]\n",
            "    name, rest = argv[0].lower(), argv[1:]\n",
        ),
    }
    fresh = {}
    for name, files in submissions.items():
        _module_code.cache_clear()
        delegation._given_spans.cache_clear()
        fresh[name] = screened(files)
    assert not fresh["reference"][0] and all(fresh[n][0] for n in list(submissions)[1:]), fresh
    for order in (list(submissions), list(reversed(submissions))):
        for name in order:
            assert screened(submissions[name]) == fresh[name], name
    screened(REFERENCE)
    before = _module_code.cache_info()
    assert (
        screened(submissions["adam-subclasses-torch-adam"]) == fresh["adam-subclasses-torch-adam"]
    )
    after = _module_code.cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (0, len(REFERENCE)), (
        "every file was read before, the changed optim.py too (an earlier screen): all kept"
    )
    once_more = patched(OPTIM, "class Adam(torch.optim.Optimizer):", "class Adam(torch.optim.SGD):")
    found = screened(once_more)
    assert _module_code.cache_info().misses == after.misses + 1, "the changed file is read again"
    assert ("get_adam_cls", "no-torch-optimizers", "torch.optim.SGD") in [v[:3] for v in found[0]]


def test_programs_share_no_state_through_what_is_kept() -> None:
    """A program changed after it is built (its nodes, its modules) leaves the next program of the
    same files as it was: each copies what ``_module_code`` keeps."""

    def state(program: Program) -> tuple[dict, dict]:
        return (
            {k: (list(n.refs), set(n.links), list(n.dynamic)) for k, n in program.nodes.items()},
            {k: (set(m.defs), dict(m.aliases)) for k, m in program.modules.items()},
        )

    first = Program(REFERENCE)
    expected = state(first)
    for node in first.nodes.values():
        node.refs.clear()
        node.links.clear()
        node.dynamic.clear()
    for module in first.modules.values():
        module.defs.clear()
        module.aliases.clear()
    assert state(Program(REFERENCE)) == expected


SMALL_ADAPTERS = """
from cs336_assignment import calc


def run_twice(x):
    return calc.twice(x)


def run_peek():
    return calc.peek()
"""
SMALL_CALC = '''
import inspect

from cs336_assignment import tools


def peek():
    """Given: a frame, through a module of the package."""
    return tools._getframe()


def twice(x):
    """Given: the check before the region; students write the rest."""
    if x is None:
        raise ValueError("x is None")
    _ = inspect.signature(twice)
    # BEGIN SOLUTION
    return 2 * x
    # END SOLUTION
'''


def test_in_a_file_with_solution_regions_each_given_statement_is_compared(tmp_path: Path) -> None:
    """A staff repository whose given code beside a region draws a finding: it stays exempt while
    that statement is unchanged, not when the student writes the same in the region, nor when a
    changed import makes an unchanged statement reach something else."""
    staff = tmp_path / "staff"
    for rel, text in {
        "adapters.py": SMALL_ADAPTERS,
        "cs336_assignment/__init__.py": "",
        "cs336_assignment/calc.py": SMALL_CALC,
        "cs336_assignment/tools.py": "def _getframe():\n    return None\n",
    }.items():
        (staff / rel).parent.mkdir(parents=True, exist_ok=True)
        (staff / rel).write_text(textwrap.dedent(text).lstrip())
    (staff / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "rules.toml", staff / "tests" / "rules.toml")
    reference = read_tree(staff)
    calc = "cs336_assignment/calc.py"

    def graded(old: str, new: str) -> dict[str, list[str]]:
        report = delegation.check_submission(
            as_bytes(patched(calc, old, new, files=reference)), staff
        )
        return {a: [v.api for v in vs] for a, vs in report.by_adapter().items()}

    assert graded("return 2 * x", "return x + x") == {}  # the region written another way
    assert graded("return 2 * x", "return len(inspect.stack()) * 0 + 2 * x") == {
        "run_twice": ["inspect.stack"]
    }
    assert (
        graded('        raise ValueError("x is None")', '        raise TypeError("x is None")')
        == {}
    )  # another given statement
    assert graded("    _ = inspect.signature(twice)", "    _ = inspect.signature(peek)") == {
        "run_twice": ["inspect.signature"]
    }
    assert graded("from cs336_assignment import tools", "import sys as tools") == {
        "run_peek": ["sys._getframe"]
    }


@pytest.mark.parametrize("case", list(CASES))
def test_each_way_of_delegating_is_found(case: str) -> None:
    """A graded function that reaches a forbidden API, however spelled, is a violation of its rule,
    with the place, the rule's words and the path from the adapter."""
    files, adapter, rule, api = CASES[case]
    report = check_sources(files)
    found = [v for v in report.by_adapter().get(adapter, []) if v.rule.id == rule]
    assert found, f"{adapter} should reach {api}:\n" + "\n".join(
        v.message() for v in report.violations
    )
    assert api in [v.api for v in found], [v.api for v in found]
    v = next(v for v in found if v.api == api)
    assert v.path[0] == f"adapters.{adapter}"
    assert rule in v.message() and v.rule.says in v.message() and ".py:" in v.where


@pytest.mark.parametrize("case", list(TAMPERING_CASES))
def test_each_way_of_reaching_the_tests_is_found(case: str) -> None:
    """Code that reaches the tests or the interpreter's insides is a violation for the adapters that
    reach it, and for no other."""
    files, adapter, api = TAMPERING_CASES[case]
    report = check_sources(files)
    by_adapter = {
        a: [v.api for v in vs if v.rule.id == TAMPERING] for a, vs in report.by_adapter().items()
    }
    assert api in by_adapter.get(adapter, []), by_adapter
    assert "run_flat_index" not in by_adapter, "a function that does not reach it is charged"


def test_reaching_the_tests_anywhere_costs_every_test_of_the_submission() -> None:
    """AdamW walking the frames: every test loses its points, the data test too, which never reaches AdamW:
    code that reaches the tests runs when its own test runs and can change the drivers of every later test in
    the same worker."""
    files, *_ = TAMPERING_CASES["frames-through-sys-getframe"]
    report = delegation.check_submission(as_bytes(files), ROOT)
    reached = {
        "tests/test_optim.py::t": ["adapters:get_adamw_cls"],
        "tests/test_training.py::t": ["tests.scenarios.training:load_final_state"],
        "tests/test_data.py::t": ["tests.scenarios.data:sampled_starts"],
    }
    concepts = {
        "tests/test_optim.py::t": "optim",
        "tests/test_training.py::t": "training",
        "tests/test_data.py::t": "data",
    }
    lost = delegation.penalties(report, reached, concepts, ROOT)
    assert sorted(lost) == [
        "tests/test_data.py::t",
        "tests/test_optim.py::t",
        "tests/test_training.py::t",
    ], lost
    assert all(TAMPERING in remark and "sys._getframe" in remark for remark in lost.values()), lost


#: Code at a module's top level runs when the module is imported, so every adapter reaches it: (the file
#: it is appended to, the code, the rule it breaks, the name the violation must be about).
AT_IMPORT_CASES = {
    "a-module-the-package-imports-rewires-a-driver": (
        "cs336_assignment/files.py",
        "\nimport tests.scenarios.data as _drive\n\n_drive.sampled_starts = None\n",
        TAMPERING,
        None,
    ),
    "adapters-py-calls-a-forbidden-name": (
        "adapters.py",
        "\n_OPT = torch.optim.AdamW([torch.zeros(1, requires_grad=True)])\n",
        None,
        "torch.optim.AdamW",
    ),
}


@pytest.mark.parametrize("case", list(AT_IMPORT_CASES))
def test_code_run_at_import_costs_every_test(case: str) -> None:
    """A module that rewires a driver, or adapters.py calling torch.optim.AdamW, at its top level: the code
    runs when the module is imported, so every adapter reaches the violation (and every test pays)."""
    path, code, rule, api = AT_IMPORT_CASES[case]
    files = patched(path, "", "", append=code)
    charged = {
        v.adapter
        for v in check_sources(files).violations
        if (rule is None or v.rule.id == rule) and (api is None or v.api == api)
    }
    assert charged == set(Program(files).entry_points()), sorted(
        set(Program(files).entry_points()) - charged
    )


def test_a_forbidden_name_only_imported_or_assigned_at_module_level_costs_nothing() -> None:
    """adapters.py importing torch.optim.AdamW, tiktoken or the tests, or naming them in module-level
    assignments (plain, unpacked, under if or try) that no graded function uses: no violation at all."""
    files = patched(
        "adapters.py",
        "",
        "",
        append=textwrap.dedent("""
        from torch.optim import AdamW as _TorchAdamW
        import tiktoken
        _UNUSED = torch.optim.AdamW
        _A, _B = torch.optim.Adam, torch.profiler
        if not os.environ.get("NEVER"):
            _C = torch.optim.SGD
        try:
            import tests.scenarios.optim as _drive
        except ImportError:
            _drive = None
        """),
    )
    assert check_sources(files).violations == []
    uses = patched(
        "adapters.py", "    return optim.AdamW\n", "    return _TorchAdamW\n", files=files
    )
    assert {v.adapter for v in check_sources(uses).violations} == {"get_adamw_cls"}


def test_code_a_reader_cannot_follow_is_flagged_not_penalised() -> None:
    """getattr with a computed name, globals() looked up, unpickling: named for a person, no violation."""
    files = patched(
        OPTIM,
        "class Adam(torch.optim.Optimizer):",
        'class Adam(getattr(torch, "op" + "tim").Adam):',
        append='\nAdam.hook = staticmethod(lambda: (globals()["x"], pickle.loads(b"")))\nimport pickle\n',
    )
    report = check_sources(files)
    assert not [v for v in report.violations if v.adapter == "get_adam_cls"], report.violations
    flagged = {
        what for a, what in {(s.adapter, s.what) for s in report.suspicious} if a == "get_adam_cls"
    }
    assert {"getattr with a computed name", "globals()"} <= flagged and any(
        w.startswith("pickle.loads") for w in flagged
    ), flagged
    notes = delegation.notes(report)
    assert any(
        "review getattr with a computed name at cs336_assignment/optim.py" in n for n in notes
    ), notes


def test_annotations_and_docstrings_are_not_uses() -> None:
    """Naming torch.optim.Adam in an annotation, a docstring or an import alone is not delegation."""
    files = patched(
        OPTIM,
        "class Adam(torch.optim.Optimizer):",
        'import torch.optim.adam\n\n\nclass Adam(torch.optim.Optimizer):\n    """Like torch.optim.Adam."""\n    peer: torch.optim.Adam | None = None\n',
    )
    report = check_sources(files)
    assert not report.violations, "\n".join(v.message() for v in report.violations)


def test_a_driver_called_with_a_name_stands_for_that_class_alone(tmp_path: Path) -> None:
    """The judge records `drive#adam` for a driver given "adam": only get_adam_cls's violations can cost it."""
    (tmp_path / "tests" / "scenarios").mkdir(parents=True)
    (tmp_path / "tests" / "scenarios" / "drive.py").write_text(
        "import adapters\nfrom tests.boundary import driver\n\n"
        'STUDENT = {"adam": adapters.get_adam_cls, "sgd": adapters.get_sgd_cls}\n\n\n'
        "@driver\ndef drive(name, steps):\n    return STUDENT[name]()\n"
    )
    reached = delegation.adapters_reached(
        ["tests.scenarios.drive:drive#adam", "adapters:run_linear"], tmp_path
    )
    assert reached == {"get_adam_cls", "run_linear"}
    assert delegation.adapters_reached(["tests.scenarios.drive:drive"], tmp_path) == {
        "get_adam_cls",
        "get_sgd_cls",
    }


def test_penalties_land_in_the_part_of_the_code_that_delegates() -> None:
    """Adam delegates: optim's test that drove Adam loses its points; accounting's test that built one does not."""
    files, *_ = CASES["adam-subclasses-torch-adam"]
    report = check_sources(files)
    reached = {
        "tests/test_optim.py::t_adam": ["adapters:get_adam_cls"],
        "tests/test_optim.py::t_sgd": ["adapters:get_sgd_cls"],
        "tests/test_accounting.py::t_state": ["adapters:get_adam_cls"],
    }
    concepts = {
        "tests/test_optim.py::t_adam": "optim",
        "tests/test_optim.py::t_sgd": "optim",
        "tests/test_accounting.py::t_state": "accounting",
    }
    lost = delegation.penalties(report, reached, concepts, ROOT)
    assert sorted(lost) == ["tests/test_optim.py::t_adam"]
    assert "no-torch-optimizers" in lost["tests/test_optim.py::t_adam"]


def test_a_local_run_warns_in_the_rules_words(tmp_path: Path) -> None:
    """pytest in a student's tree whose Adam subclasses torch's prints the rule, before the per-part table."""
    files, *_ = CASES["adam-subclasses-torch-adam"]
    shipped = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("*.py")} | {
        "tests/rules.toml",
        "pyproject.toml",
        "rubric.toml",
    }
    for rel in [*files, *shipped]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(files[rel] if rel in files else (ROOT / rel).read_text())
    (tmp_path / "tests" / "scenarios").mkdir()
    for p in (ROOT / "tests" / "scenarios").glob("*.py"):
        (tmp_path / "tests" / "scenarios" / p.name).write_text(p.read_text())
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "tests/test_tensors.py",
            "-k",
            "flat_index_worked_example",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout
    says = next(r.says for r in BOOK.rules if r.id == "no-torch-optimizers")
    assert "RULE adapters.get_adam_cls reaches torch.optim.Adam" in out and says in out, (
        out[-3000:] + proc.stderr[-2000:]
    )
    assert out.index("RULE adapters.get_adam_cls") < out.index("public progress by part"), out[
        -3000:
    ]
    assert "a module by a computed name" not in out, (
        "the given cli.py was reported in a student's run"
    )


def test_the_program_resolves_package_reexports() -> None:
    """`accounting.count_flops` in adapters.py is the function defined in accounting/flop_counter.py."""
    program = Program(REFERENCE)
    assert program.resolve("cs336_assignment.accounting.count_flops") == (
        "node",
        "cs336_assignment.accounting.flop_counter.count_flops",
    )


def _copy_of_the_repository(root: Path) -> None:
    shutil.copytree(
        ROOT / "cs336_assignment",
        root / "cs336_assignment",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy(ROOT / "adapters.py", root / "adapters.py")
    (root / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "rules.toml", root / "tests" / "rules.toml")


def test_every_statement_of_the_rules_is_checked_against_the_file(tmp_path: Path) -> None:
    """Change a part's `may_use` in tests/rules.toml: cs336 parts --check names that part's module
    docstring and prints the block to paste; on this repository there is nothing to report."""
    from cs336_staff.parts import load_parts

    parts = load_parts(ROOT)
    assert rules_docs.problems(ROOT, parts) == []
    _copy_of_the_repository(tmp_path)
    rules = tmp_path / "tests" / "rules.toml"
    rules.write_text(
        rules.read_text().replace(
            "torch.optim.Optimizer as the base class", "torch.optim.Optimizer only"
        )
    )
    found = rules_docs.problems(tmp_path, parts)
    assert (
        len(found) == 1
        and "cs336_assignment/optim.py" in found[0]
        and "torch.optim.Optimizer only" in found[0]
    ), found


def test_a_changed_given_file_is_recorded_again_before_a_release(tmp_path: Path) -> None:
    """Staff change cli.py's code: cs336 parts --check prints the [[given]] entry with its new fingerprints."""
    _copy_of_the_repository(tmp_path)
    cli = tmp_path / CLI
    cli.write_text(
        cli.read_text().replace(
            "    name, rest = argv[0], argv[1:]\n", "    name, rest = argv[0].lower(), argv[1:]\n"
        )
    )
    found = rules_docs.given_problems(tmp_path, BOOK, tmp_path / "tests" / "rules.toml")
    prints = fingerprint(cli.read_text())
    assert prints is not None, "cli.py parses"
    assert len(found) == 1 and "[[given]]" in found[0] and prints in found[0], found


def test_delegation_in_adapters_py_costs_the_adapters_own_part_only() -> None:
    """get_adamw_cls returning torch.optim.AdamW: the optim test loses, the accounting one keeps."""
    files, *_ = CASES["adapter-returns-torch-adamw"]
    report = check_sources(files)
    reached = {
        "tests/test_optim.py::t": ["adapters:get_adamw_cls"],
        "tests/test_accounting.py::t": ["tests.scenarios.accounting:student_optimizer_state_bytes"],
    }
    lost = delegation.penalties(
        report,
        reached,
        {"tests/test_optim.py::t": "optim", "tests/test_accounting.py::t": "accounting"},
        ROOT,
    )
    assert sorted(lost) == ["tests/test_optim.py::t"]


def test_the_base_class_schedulers_and_foreach_ops_stay_allowed() -> None:
    """torch.optim.Optimizer (the base class), torch.optim.lr_scheduler, torch._foreach_* tensor ops and
    gc.collect are allowed; torch's optimizers, their fused kernels and gc's object walks are not."""
    rule = next(r for r in BOOK.rules if r.id == "no-torch-optimizers")
    assert not rule.forbids("torch.optim.Optimizer.zero_grad") and not rule.forbids(
        "torch.optim.lr_scheduler.LambdaLR"
    )
    assert (
        rule.forbids("torch.optim.AdamW")
        and rule.forbids("torch.optim.adamw.adamw")
        and rule.forbids("torch.optim")
    )
    assert rule.forbids_ref("attribute", "_fused_adamw_") and not rule.forbids_ref(
        "attribute", "_foreach_add_"
    )
    tampering = next(r for r in BOOK.rules if r.id == TAMPERING)
    assert not tampering.forbids("gc.collect") and tampering.forbids("gc.get_objects")
    assert not tampering.forbids_ref("store", "torch.backends.cuda.matmul.allow_tf32")
