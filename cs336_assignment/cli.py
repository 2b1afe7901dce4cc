"""The ``cs336`` command: one entry point, one module per subcommand.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and ``run(args) -> int``.
Modules are imported only when their subcommand runs, so ``cs336 --help`` stays instant.

Bad input ends in one line, in argparse's form, on stderr: ``cs336 CMD: error: what is wrong and
what to do``, exit status 2. argparse says it for what it checks itself (after its usage line); a
command raises ``CommandError`` for what it finds later (a flag's value this machine cannot honour,
a file in the way), and ``main`` prints it the same way, never a traceback.

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


class CommandError(Exception):
    """Bad input to a command, found after parsing: ``main`` prints ``cs336 CMD: error: MESSAGE`` and
    returns ``status`` (2, as argparse; 1 for a command whose own check failed). The message names
    flags as typed (``--gpus``) and says what to do."""

    def __init__(self, message: object, status: int = 2) -> None:
        super().__init__(str(message))
        self.status = status


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
    try:
        args = cmd_parser.parse_args(rest)
    except SystemExit as e:  # argparse printed its error (or --help): the status, as a return value
        return e.code if isinstance(e.code, int) else 2
    try:
        return int(module.run(args) or 0)
    except CommandError as e:
        sys.stdout.flush()  # the error comes last, on a line of its own
        print(f"{cmd_parser.prog}: error: {e}", file=sys.stderr)
        return e.status


if __name__ == "__main__":
    sys.exit(main())
