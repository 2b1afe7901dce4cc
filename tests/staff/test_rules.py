"""The rules check (tests/rules.py): each way of delegating is found, the reference and the
handout's stubs are clean, and a local run says so in the rule's words."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cs336_staff.grade import delegation
from cs336_staff.markers import is_staff_only, strip_source, strip_staff_only
from tests.rules import Program, check_sources, load_rules, read_tree

pytestmark = pytest.mark.staff

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = read_tree(ROOT)
#: Where the reference reaches code a reader cannot follow: the given `cs336` command's dispatch.
KNOWN_SUSPICIOUS = {("importlib.import_module", "cs336_assignment/cli.py")}


def patched(path: str, old: str, new: str, *, append: str = "") -> dict[str, str]:
    """The reference with ``old`` replaced by ``new`` (once, and it must be there) in ``path``."""
    files = dict(REFERENCE)
    assert old in files[path], f"{old!r} is no longer in {path}; update this test's case"
    files[path] = files[path].replace(old, new, 1) + append
    return files


OPTIM, MODELS, FLOPS = "cs336_assignment/optim.py", "cs336_assignment/models.py", "cs336_assignment/accounting/flop_counter.py"
TRAIN = "cs336_assignment/tokenization/train.py"
CASES = {
    # the three of the integrity issue
    "adam-subclasses-torch-adam": (
        patched(OPTIM, "class Adam(torch.optim.Optimizer):", "class Adam(torch.optim.Adam):"),
        "get_adam_cls", "no-torch-optimizers", "torch.optim.Adam"),
    "linear-forward-calls-functional-linear": (
        patched(MODELS, "from torch import Tensor, nn\n", "from torch import Tensor, nn\nfrom torch.nn import functional as F\n",
                append="\n\ndef _apply(layer, x):\n    return F.linear(x, layer.weight)\n\n\nLinear.forward = _apply\n"),
        "get_linear_cls", "no-library-linear", "torch.nn.functional.linear"),
    "count-flops-on-flop-counter-mode": (
        patched(FLOPS, "    with FlopCounter() as counter:", "    with torch.utils.flop_counter.FlopCounterMode(display=False) as counter:"),
        "run_count_flops", "no-flop-counter-library", "torch.utils.flop_counter.FlopCounterMode"),
    # other spellings of delegation
    "adapter-returns-torch-adamw": (
        patched("adapters.py", "    return optim.AdamW\n", "    return torch.optim.AdamW\n"),
        "get_adamw_cls", "no-torch-optimizers", "torch.optim.AdamW"),
    "alias-from-import-as": (
        patched(OPTIM, "class SGD(torch.optim.Optimizer):", "class SGD(_Base):",
                append="\nfrom torch.optim import SGD as _TorchSGD\n_Base = _TorchSGD\n"),
        "get_sgd_cls", "no-torch-optimizers", "torch.optim.SGD"),
    "getattr-with-a-literal-name": (
        patched(OPTIM, "class RMSProp(torch.optim.Optimizer):", 'class RMSProp(getattr(torch.optim, "RMSprop")):'),
        "get_rmsprop_cls", "no-torch-optimizers", "torch.optim.RMSprop"),
    "tokenizer-library-in-a-helper-of-another-module": (
        {**patched(TRAIN, "    special_tokens = check_special_tokens(special_tokens)\n",
                   "    special_tokens = check_special_tokens(special_tokens)\n    _peek(input_path)\n",
                   append="\nfrom .helpers import peek as _peek\n"),
         "cs336_assignment/tokenization/helpers.py": "import tiktoken as tk\n\n\ndef peek(path):\n    return tk.get_encoding('gpt2')\n"},
        "run_train_bpe", "no-tokenizer-library", "tiktoken.get_encoding"),
    "grad-scaler": (
        patched("cs336_assignment/precision/loss_scaling.py", "from torch import Tensor\n",
                "from torch import Tensor\nfrom torch.amp import GradScaler\n",
                append="\n\nDynamicLossScaler = GradScaler\n"),
        "get_loss_scaler_cls", "no-library-grad-scaler", "torch.amp.GradScaler"),
}


def test_the_rules_file_reads_and_names_every_part() -> None:
    """tests/rules.toml: every part of the rubric has its `may_use`, every rule its home part."""
    import tomllib

    book = load_rules()
    parts = list(tomllib.loads((ROOT / "rubric.toml").read_text())["concepts"])
    assert sorted(book.may_use) == sorted(parts), "tests/rules.toml needs one [parts.KEY] per rubric concept"
    assert {r.part for r in book.rules} <= set(parts)
    assert all(r.forbidden and r.says for r in book.rules)


def test_the_reference_obeys_the_rules() -> None:
    """No adapter of the reference reaches a forbidden API; the one construct it cannot follow is the given CLI's."""
    report = check_sources(REFERENCE)
    assert not report.errors, report.errors
    assert not report.violations, "\n".join(v.message() for v in report.violations)
    assert {(s.what, s.where.split(":")[0]) for s in report.suspicious} <= KNOWN_SUSPICIOUS, report.suspicious


def test_the_handout_stubs_obey_the_rules() -> None:
    """The handout's files (solution regions stubbed, staff-only code dropped) are clean too."""
    files = {}
    for rel, text in REFERENCE.items():
        if is_staff_only(text):
            continue
        files[rel] = strip_source(strip_staff_only(text, rel), rel)[0]
    report = check_sources(files)
    assert not report.violations, "\n".join(v.message() for v in report.violations)


@pytest.mark.parametrize("case", list(CASES))
def test_each_way_of_delegating_is_found(case: str) -> None:
    """A graded function that reaches a forbidden API, however spelled, is a violation of its rule,
    with the place, the rule's words and the path from the adapter."""
    files, adapter, rule, api = CASES[case]
    report = check_sources(files)
    found = [v for v in report.by_adapter().get(adapter, []) if v.rule.id == rule]
    assert found, f"{adapter} should reach {api}:\n" + "\n".join(v.message() for v in report.violations)
    v = found[0]
    assert v.api == api and v.path[0] == f"adapters.{adapter}"
    assert rule in v.message() and v.rule.says in v.message() and ".py:" in v.where


def test_code_a_reader_cannot_follow_is_flagged_not_penalised() -> None:
    """getattr with a computed name, exec at import: named as suspicious for a person, no violation."""
    files = patched(OPTIM, "class Adam(torch.optim.Optimizer):", 'class Adam(getattr(torch, "op" + "tim").Adam):',
                    append='\nAdam.hook = staticmethod(lambda: exec("x = 1"))\n')
    report = check_sources(files)
    assert not [v for v in report.violations if v.adapter == "get_adam_cls"]
    flagged = {(s.adapter, s.what) for s in report.suspicious}
    assert ("get_adam_cls", "getattr with a computed name") in flagged and ("get_adam_cls", "exec") in flagged, flagged
    assert any("review getattr with a computed name at cs336_assignment/optim.py" in n for n in delegation.notes(report))


def test_annotations_and_docstrings_are_not_uses() -> None:
    """Naming torch.optim.Adam in an annotation, a docstring or an import alone is not delegation."""
    files = patched(OPTIM, "class Adam(torch.optim.Optimizer):",
                    'import torch.optim.adam\n\n\nclass Adam(torch.optim.Optimizer):\n    """Like torch.optim.Adam."""\n    peer: torch.optim.Adam | None = None\n')
    report = check_sources(files)
    assert not report.violations, "\n".join(v.message() for v in report.violations)


def test_a_scenario_called_with_a_name_stands_for_that_class_alone(tmp_path: Path) -> None:
    """The judge records `drive#adam` for a scenario given "adam": only get_adam_cls's violations can cost it."""
    (tmp_path / "tests" / "scenarios").mkdir(parents=True)
    (tmp_path / "tests" / "scenarios" / "drive.py").write_text(
        "import adapters\nfrom tests.boundary import student_side\n\n"
        'STUDENT = {"adam": adapters.get_adam_cls, "sgd": adapters.get_sgd_cls}\n\n\n'
        "@student_side\ndef drive(name, steps):\n    return STUDENT[name]()\n"
    )
    reached = delegation.adapters_reached(["tests.scenarios.drive:drive#adam", "adapters:run_linear"], tmp_path)
    assert reached == {"get_adam_cls", "run_linear"}
    assert delegation.adapters_reached(["tests.scenarios.drive:drive"], tmp_path) == {"get_adam_cls", "get_sgd_cls"}


def test_penalties_land_in_the_part_of_the_code_that_delegates() -> None:
    """Adam delegates: optim's test that drove Adam loses its points; accounting's test that built one does not."""
    files, *_ = CASES["adam-subclasses-torch-adam"]
    report = check_sources(files)
    reached = {"tests/test_optim.py::t_adam": ["adapters:get_adam_cls"],  # optim's loops run in the judge
               "tests/test_optim.py::t_sgd": ["adapters:get_sgd_cls"],
               "tests/test_accounting.py::t_state": ["tests.scenarios.accounting:student_optimizer_state_bytes"]}
    concepts = {"tests/test_optim.py::t_adam": "optim", "tests/test_optim.py::t_sgd": "optim",
                "tests/test_accounting.py::t_state": "accounting"}
    lost = delegation.penalties(report, reached, concepts, ROOT)
    assert sorted(lost) == ["tests/test_optim.py::t_adam"]
    assert "no-torch-optimizers" in lost["tests/test_optim.py::t_adam"]


def test_a_local_run_warns_in_the_rules_words(tmp_path: Path) -> None:
    """pytest in a student's tree whose Adam subclasses torch's prints the rule, before the per-part table."""
    files, *_ = CASES["adam-subclasses-torch-adam"]
    shipped = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("*.py")} | {"tests/rules.toml", "pyproject.toml", "rubric.toml"}
    for rel in [*files, *shipped]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(files[rel] if rel in files else (ROOT / rel).read_text())
    (tmp_path / "tests" / "scenarios").mkdir()
    for p in (ROOT / "tests" / "scenarios").glob("*.py"):
        (tmp_path / "tests" / "scenarios" / p.name).write_text(p.read_text())
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "tests/test_tensors.py", "-k", "flat_index_worked_example"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = proc.stdout
    says = next(r.says for r in load_rules().rules if r.id == "no-torch-optimizers")
    assert "RULE adapters.get_adam_cls reaches torch.optim.Adam" in out and says in out, out[-3000:] + proc.stderr[-2000:]
    assert out.index("RULE adapters.get_adam_cls") < out.index("public progress by part"), out[-3000:]


def test_the_program_resolves_package_reexports() -> None:
    """`accounting.count_flops` in adapters.py is the function defined in accounting/flop_counter.py."""
    program = Program(REFERENCE)
    assert program.resolve("cs336_assignment.accounting.count_flops") == ("node", "cs336_assignment.accounting.flop_counter.count_flops")


def test_every_statement_of_the_rules_is_checked_against_the_file(tmp_path: Path) -> None:
    """Change a part's `may_use` in tests/rules.toml: cs336 parts --check names that part's module
    docstring and prints the block to paste; on this repository there is nothing to report."""
    import shutil

    from cs336_staff import rules_docs
    from cs336_staff.parts import load_parts

    parts = load_parts(ROOT)
    assert rules_docs.problems(ROOT, parts) == []
    shutil.copytree(ROOT / "cs336_assignment", tmp_path / "cs336_assignment", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "adapters.py", tmp_path / "adapters.py")
    (tmp_path / "tests").mkdir()
    text = (ROOT / "tests" / "rules.toml").read_text()
    (tmp_path / "tests" / "rules.toml").write_text(text.replace("torch.optim.Optimizer as the base class", "torch.optim.Optimizer only"))
    found = rules_docs.problems(tmp_path, parts)
    assert len(found) == 1 and "cs336_assignment/optim.py" in found[0] and "torch.optim.Optimizer only" in found[0], found


def test_delegation_in_adapters_py_costs_the_adapters_own_part_only() -> None:
    """get_adam_cls returning a torch.optim.Adam subclass: the optim test loses, the accounting one keeps."""
    files, *_ = CASES["adapter-returns-torch-adamw"]
    report = check_sources(files)
    reached = {"tests/test_optim.py::t": ["adapters:get_adamw_cls"],
               "tests/test_accounting.py::t": ["tests.scenarios.accounting:student_optimizer_state_bytes"]}
    lost = delegation.penalties(report, reached, {"tests/test_optim.py::t": "optim", "tests/test_accounting.py::t": "accounting"}, ROOT)
    assert sorted(lost) == ["tests/test_optim.py::t"]


def test_constructs_in_the_staffs_own_given_code_are_not_noted() -> None:
    """The reference's importlib dispatch in cli.py is the staff's own code: no note; an edited cli.py gets one."""
    as_bytes = {k: v.encode() for k, v in REFERENCE.items()}
    report = check_sources(REFERENCE)
    assert not [n for n in delegation.notes(report, as_bytes, ROOT) if "review" in n]
    edited = {**as_bytes, "cs336_assignment/cli.py": as_bytes["cs336_assignment/cli.py"] + b"\n# edited\n"}
    assert [n for n in delegation.notes(report, edited, ROOT) if "review importlib.import_module" in n]


def test_the_base_class_and_schedulers_of_torch_optim_stay_allowed() -> None:
    """torch.optim.Optimizer (the base class) and torch.optim.lr_scheduler are not optimizers: allowed."""
    rule = next(r for r in load_rules().rules if r.id == "no-torch-optimizers")
    assert not rule.forbids("torch.optim.Optimizer.zero_grad") and not rule.forbids("torch.optim.lr_scheduler.LambdaLR")
    assert rule.forbids("torch.optim.AdamW") and rule.forbids("torch.optim.adamw.adamw") and rule.forbids("torch.optim")
