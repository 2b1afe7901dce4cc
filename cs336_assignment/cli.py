"""The ``cs336`` command: one entry point, one module per subcommand.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and ``run(args) -> int``.
Modules are imported only when their subcommand runs, so ``cs336 --help`` stays instant.

    $ uv run cs336 --help
    $ uv run cs336 train --steps 200
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

# name -> (module, one-line help).
COMMANDS: dict[str, tuple[str, str]] = {
    "train": (
        "cs336_assignment.commands.train",
        "train the Cruncher on the synthetic regression task",
    ),
    "train-bpe": ("cs336_assignment.commands.bpe", "train a byte-level BPE tokenizer on a corpus"),
    "encode": (
        "cs336_assignment.commands.encode",
        "encode a text file into a memmappable token array",
    ),
    "account": (
        "cs336_assignment.commands.account",
        "napkin math: FLOPs, memory and training time",
    ),
    # BEGIN STAFF-ONLY
    # Staff tooling: dropped from the handout (and from its `cs336 --help`) with this block.
    "grade": ("cs336_staff.grade.cli", "grade submissions (default: the bundled example)"),
    "merge": ("cs336_staff.grade.merge", "merge a CPU run and a GPU run of the same submissions"),
    "autograder": (
        "cs336_staff.grade.autograder",
        "build autograder.zip for Gradescope (setup.sh, run_autograder, staff tests)",
    ),
    "release": ("cs336_staff.release", "generate the student handout (or --check it)"),
    "snapshots": (
        "cs336_staff.snapshots",
        "regenerate .npz snapshots from the reference (or --check)",
    ),
    "audit": (
        "cs336_staff.audit.cli",
        "run the bug zoo: every mutant must be caught by the public suite",
    ),
    "parts": (
        "cs336_staff.parts_cli",
        "the parts and their points (one source); --check the copies, --write README.md",
    ),
    "writeup": (
        "cs336_staff.writeup",
        "typeset assignment.pdf (and the staff answer key) with Typst",
    ),
    # END STAFF-ONLY
}


def _available() -> dict[str, tuple[str, str]]:
    """Commands whose top-level package is importable in this tree (a staff checkout without its
    staff dependencies still gets the student commands)."""
    out = {}
    for name, (module, help_) in COMMANDS.items():
        if importlib.util.find_spec(module.split(".")[0]) is not None:
            out[name] = (module, help_)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    commands = _available()
    parser = argparse.ArgumentParser(prog="cs336", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_) in commands.items():
        sub.add_parser(name, help=help_, add_help=False)
    if not argv or argv[0] not in commands:
        parser.parse_args(argv or ["--help"])
        return 2
    name, rest = argv[0], argv[1:]
    module = importlib.import_module(commands[name][0])
    cmd_parser = argparse.ArgumentParser(prog=f"cs336 {name}", description=module.__doc__)
    cmd_parser.formatter_class = argparse.RawDescriptionHelpFormatter
    module.add_arguments(cmd_parser)
    return int(module.run(cmd_parser.parse_args(rest)) or 0)


if __name__ == "__main__":
    sys.exit(main())
