"""The parts of the assignment and their points, from one source (``cs336_staff/parts.py``).

$ uv run cs336 parts            # the parts table, as README.md shows it
$ uv run cs336 parts --check    # fail if any copy (README.md, adapters.py headers, ...) drifted
$ uv run cs336 parts --write    # regenerate README.md's parts table
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cs336_assignment.cli import CommandError
from cs336_staff.parts import PartsError, load_parts, problems, readme_table, with_readme_block

REPO = Path(__file__).resolve().parents[1]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--check", action="store_true", help="fail if a copy of the parts disagrees with its source"
    )
    parser.add_argument(
        "--write", action="store_true", help="regenerate the parts table of README.md"
    )
    parser.add_argument("--repo", type=Path, default=REPO, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    try:
        parts = load_parts(args.repo)
        if args.write:
            readme = args.repo / "README.md"
            readme.write_text(
                with_readme_block(readme.read_text(encoding="utf-8"), parts), encoding="utf-8"
            )
            print(f"parts: rewrote the parts table of {readme}")
        if args.check:
            found = problems(args.repo, parts)
            for line in found:
                print(f"parts: {line}")
            if found:
                return 1
            print(
                f"parts: {len(parts)} parts, {sum(p.points for p in parts):g} points; every copy agrees with rubric.toml and the code"
            )
        if not (args.write or args.check):
            print(readme_table(parts))
    except PartsError as e:
        raise CommandError(e, status=1) from None
    return 0
