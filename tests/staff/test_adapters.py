"""Staff checks of ``adapters.py``, the contract between the tests and the student's code.

For every ``run_*`` / ``get_*`` adapter:
  * its docstring is one line naming ``cs336_assignment.<module>.<name>``, which exists and is what
    the body actually uses (so the docstring cannot drift from the code);
  * if its body is a single ``return f(...)``, the arguments are exactly the adapter's own
    parameters (none silently ignored, nothing hard-coded), and ``f``'s signature accepts them under
    the same names and positions, with the same defaults where both have one;
  * some test under ``tests/`` calls it.

A part whose module is still a placeholder is skipped with that reason.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

from cs336_staff.worker.adapter_rule import is_adapter, read_adapters

pytestmark = pytest.mark.staff

ROOT = Path(__file__).resolve().parents[2]
SOURCE = (ROOT / "adapters.py").read_text()
TREE = ast.parse(SOURCE)
ADAPTERS: dict[str, ast.FunctionDef] = {
    node.name: node
    for node in TREE.body
    if isinstance(node, ast.FunctionDef) and is_adapter(node.name)
}
TARGETS = read_adapters(SOURCE)  # what the staff tools believe each adapter calls
TARGET = re.compile(r"cs336_assignment\.([A-Za-z_][\w]*)\.([A-Za-z_][\w]*)")


def docstring_target(name: str) -> tuple[str, str]:
    """(module, attribute) named by the adapter's docstring; fails if there is none."""
    doc = ast.get_docstring(ADAPTERS[name]) or ""
    match = TARGET.search(doc)
    assert match, f"adapters.{name}'s docstring {doc!r} names no cs336_assignment.<module>.<name>"
    return match.group(1), match.group(2)


def import_part(module: str) -> ModuleType:
    """Import ``cs336_assignment.<module>``; skip while that part is still a placeholder."""
    mod = importlib.import_module(f"cs336_assignment.{module}")
    if (mod.__doc__ or "").lstrip().startswith("(placeholder"):
        pytest.skip(f"cs336_assignment.{module} is still a placeholder")
    return mod


def body_without_docstring(fn: ast.FunctionDef) -> list[ast.stmt]:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return body


def single_return_call(fn: ast.FunctionDef) -> ast.Call | None:
    """The call of a body that is exactly ``return module.f(...)``, else None."""
    body = body_without_docstring(fn)
    if len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Call):
        return body[0].value
    return None


def attribute_refs(fn: ast.FunctionDef) -> set[str]:
    """Every ``module.name`` attribute reference in the adapter's body, as a dotted string."""
    return {
        f"{node.value.id}.{node.attr}"
        for node in ast.walk(fn)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
    }


NAMES = sorted(ADAPTERS)


def test_adapters_exist():
    """adapters.py defines run_*/get_* adapters at all (the parse found them)."""
    assert len(ADAPTERS) >= 10, f"found only {sorted(ADAPTERS)} in adapters.py"


@pytest.mark.parametrize("name", NAMES)
def test_adapter_docstring_names_the_function_it_calls(name):
    """The one-line docstring names a real cs336_assignment object, and the body uses that object."""
    doc = ast.get_docstring(ADAPTERS[name])
    assert doc, f"adapters.{name} has no docstring"
    assert "\n" not in doc.strip(), f"adapters.{name}'s docstring must be one line, got {doc!r}"
    module, attr = docstring_target(name)
    mod = import_part(module)
    assert hasattr(mod, attr), (
        f"adapters.{name}'s docstring names cs336_assignment.{module}.{attr}, which does not exist"
    )
    refs = attribute_refs(ADAPTERS[name])
    assert f"{module}.{attr}" in refs, (
        f"adapters.{name}'s docstring names {module}.{attr} but its body uses {sorted(refs)}"
    )
    read = TARGETS[name]
    assert (read.module, read.target) == (module, attr), (
        f"adapters.{name}: adapter_rule.read_adapters reads its target as {read.module}.{read.target}, the "
        f"docstring names {module}.{attr}; the body must use the docstring's target before anything else of cs336_assignment"
    )


def argument_names(arg: ast.expr) -> list[str] | None:
    """The adapter parameters an argument expression is built from, or None if it is anything else."""
    if isinstance(arg, ast.Name):
        return [arg.id]
    if isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name):
        return [arg.value.id]
    if isinstance(arg, ast.Tuple):
        names = [e.id for e in arg.elts if isinstance(e, ast.Name)]
        if len(names) == len(arg.elts):
            return names
    return None


def name_of(node: ast.expr) -> str:
    """The identifier of a Name (``argument_names`` has checked that every argument is built of them)."""
    assert isinstance(node, ast.Name), ast.unparse(node)
    return node.id


FORWARDERS = [n for n in NAMES if single_return_call(ADAPTERS[n]) is not None]


@pytest.mark.parametrize("name", FORWARDERS)
def test_forwarding_adapter_passes_exactly_its_parameters(name: str) -> None:
    """A `return f(...)` adapter forwards every parameter, only parameters, under f's own names."""
    import adapters

    fn = ADAPTERS[name]
    call = single_return_call(fn)
    assert call is not None  # FORWARDERS are the adapters that have one
    adapter_sig = inspect.signature(getattr(adapters, name))
    own = set(adapter_sig.parameters)

    used: list[str] = []
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        names = argument_names(arg)
        assert names is not None, (
            f"adapters.{name} passes {ast.unparse(arg)!r}: pass the adapter's own parameters, not other values"
        )
        used += names
    unknown = [n for n in used if n not in own]
    assert not unknown, (
        f"adapters.{name} passes {unknown}, which are not its parameters {sorted(own)}"
    )
    ignored = own - set(used)
    assert not ignored, f"adapters.{name} silently ignores its parameters {sorted(ignored)}"
    assert len(used) == len(set(used)), f"adapters.{name} passes a parameter twice: {used}"

    if not call.args and not call.keywords:
        return
    module, _ = docstring_target(name)
    mod = import_part(module)
    callee_path = ast.unparse(call.func)
    head, _, attr = callee_path.partition(".")
    assert head == module and attr, f"adapters.{name} calls {callee_path}, expected {module}.<name>"
    callee = getattr(mod, attr, None)
    assert callee is not None, f"adapters.{name} calls {callee_path}, which does not exist"
    callee_sig = inspect.signature(callee)

    # Bind placeholders the way the call would, then check each lands on a same-named parameter.
    sentinels = {n: object() for n in own}
    args: list[object] = []
    kwargs: dict[str, object] = {}
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            assert any(p.kind is p.VAR_POSITIONAL for p in callee_sig.parameters.values()), (
                f"adapters.{name} forwards *{name_of(arg.value)} but {callee_path}{callee_sig} takes no *args"
            )
        elif isinstance(arg, ast.Tuple):
            args.append(tuple(sentinels[name_of(e)] for e in arg.elts))
        else:
            args.append(sentinels[name_of(arg)])
    for kw in call.keywords:
        if kw.arg is None:
            # Forwarding **kwargs needs somewhere for them to go: **kwargs or optional keywords.
            assert any(
                p.kind is p.VAR_KEYWORD
                or (p.kind is not p.VAR_POSITIONAL and p.default is not p.empty)
                for p in callee_sig.parameters.values()
            ), (
                f"adapters.{name} forwards **{name_of(kw.value)} but {callee_path}{callee_sig} takes no optional keywords"
            )
        else:
            kwargs[kw.arg] = sentinels[name_of(kw.value)]
    try:
        bound = callee_sig.bind(*args, **kwargs)
    except TypeError as e:
        pytest.fail(
            f"{callee_path}{callee_sig} does not accept adapters.{name}'s call {ast.unparse(call)}: {e}"
        )
    by_sentinel = {id(v): k for k, v in bound.arguments.items()}
    for param, sentinel in sentinels.items():
        if id(sentinel) in by_sentinel:
            landed = by_sentinel[id(sentinel)]
            assert landed == param, (
                f"adapters.{name} passes its parameter {param!r} to {callee_path}'s parameter {landed!r}: "
                f"use the same names in the same positions ({callee_sig})"
            )
            mine, theirs = (
                adapter_sig.parameters[param].default,
                callee_sig.parameters[landed].default,
            )
            if mine is not inspect.Parameter.empty and theirs is not inspect.Parameter.empty:
                assert mine == theirs, (
                    f"adapters.{name}({param}={mine!r}) but {callee_path} defaults {landed}={theirs!r}"
                )


def files_calling(name: str) -> list[Path]:
    """Test modules and the scenarios they run (tests/scenarios/, where tests drive your objects) naming ``name``."""
    pattern = re.compile(rf"\b{re.escape(name)}\b")
    files = [*(ROOT / "tests").rglob("test_*.py"), *(ROOT / "tests" / "scenarios").glob("*.py")]
    return [
        p
        for p in files
        if "staff" not in p.relative_to(ROOT / "tests").parts and pattern.search(p.read_text())
    ]


@pytest.mark.parametrize("name", NAMES)
def test_every_adapter_is_called_by_a_test(name):
    """Each adapter is used by at least one graded test (public or hidden)."""
    assert files_calling(name), f"no test under tests/ calls adapters.{name}; test it or remove it"
