"""What counts as an adapter, and what each one calls: the one home of the rule, as data.

An adapter is a public function of ``adapters.py`` whose name starts with one of
``ADAPTER_PREFIXES``; ``run_*`` adapters take and return data (``DATA_PREFIX``), ``get_*`` ones
return a class or an object of the submission. Its target is the one
``cs336_assignment.<module>.<name>`` its body uses (read from the code, never from the
docstring; ``tests/staff/test_adapters.py`` checks the docstring names the same one).

Asked by the judge (which adapters to proxy), the worker (which names it will call), the parts
(which adapters a part has), the release's behaviour check (which recorded adapters compute a
graded function) and the staff tests. Standard library only: it lives in the worker package
because the worker runs inside the sandbox, where nothing else of the staff repository exists.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

ADAPTER_PREFIXES = ("run_", "get_")
#: Adapters that take and return data (the others return a class or an object).
DATA_PREFIX = "run_"
PACKAGE = "cs336_assignment"


def is_adapter(name: str) -> bool:
    """Whether ``name`` is an adapter's name (the worker calls nothing else of ``adapters``)."""
    return name.startswith(ADAPTER_PREFIXES)


@dataclass(frozen=True)
class Adapter:
    name: str
    module: str  # "tensors": cs336_assignment.tensors
    target: str  # "flat_index": the function or class of that module the adapter calls

    @property
    def takes_data(self) -> bool:
        return self.name.startswith(DATA_PREFIX)


def read_adapters(source: str) -> dict[str, Adapter]:
    """Every adapter of the ``adapters.py`` text ``source``, in file order, with its target.

    Read from the syntax tree, never by importing (that would import the reference). An adapter
    whose body uses no ``<module>.<name>`` of a ``cs336_assignment`` submodule that ``adapters.py``
    imports gets an empty module and target."""
    tree = ast.parse(source)
    parts = {
        alias.asname or alias.name: alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module == PACKAGE and node.level == 0
        for alias in node.names
    }  # local name -> module
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and is_adapter(node.name):
            uses = [
                (parts[n.value.id], n.attr)
                for statement in node.body
                for n in ast.walk(statement)
                if isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name)
                and n.value.id in parts
            ]
            module, target = uses[0] if uses else ("", "")
            found[node.name] = Adapter(node.name, module, target)
    return found
