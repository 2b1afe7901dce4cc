"""No number of the answer key appears in what the handout ships (``cs336 release --check``: answers).

The written problems ask about other inputs than the worked examples in the docstrings (see
``GIVEN`` in ``cs336_staff/writeup/answers.py``), so that an answer is computed, not copied. This
check keeps it so: every distinctive number of the key (``answers.compute()``) is looked for in
every ``.py`` and ``.md`` file of the handout, in any spelling a docstring or a doctest might use:
``143.9``, ``1.439e2``, ``144 days``, ``6.3e+24``, ``40B``, ``40_000_000_000``, ``1,011``.

A number in the handout matches an answer when it is the answer exactly, or when it has at least
``MIN_DIGITS`` significant digits and is the answer rounded to that many. Answers that are not
distinctive are not looked for: whole numbers below ``MIN_WHOLE`` (a byte count, a number of GPUs,
255 merges, which code is full of), fractions of fewer than ``MIN_DIGITS`` digits (0.25), numbers
that are given data (``GIVEN``, e.g. datasheet peaks), and the number formats' own constants
(``FORMAT_FACTS``: the formats problem asks for what ``torch.finfo`` prints and the fp8 code must
hold, E4M3's 448).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from cs336_staff.release.results import Check, Handout

#: The writeup whose answer key (cs336_staff/writeup/answers.py) the check reads.
WRITEUP = "writeup/assignment.typ"
#: A rounded number must keep this many significant digits to count as a spelling of an answer.
MIN_DIGITS = 3
#: Whole-number answers below this are not distinctive (12 bytes, 7 GPUs, 255 merges) and are not looked for.
MIN_WHOLE = 1000
#: Answers that are constants of a number format (max, smallest normal, epsilon): code must hold them.
FORMAT_FACTS = re.compile(r"^(bf16|fp16|fp32|e4m3|e5m2)_(max|smallest_normal|eps)$")

_SUFFIX = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}
_NUMBER = re.compile(r"(?<![\w.])(\d[\d_,]*(?:\.\d+)?(?:[eE][-+]?\d+)?)([KMBT](?![A-Za-z]))?")


def numbers(text: str) -> list[tuple[float, int, str]]:
    """Every number written in ``text``: (value, significant digits, as written).

    >>> [(v, d) for v, d, _ in numbers("about 144 days, 6.3e+24 FLOPs, 40B, 1,011 GPUs, v2.0")]
    [(144.0, 3), (6.3e+24, 2), (40000000000.0, 1), (1011.0, 4)]
    """
    out = []
    for m in _NUMBER.finditer(text):
        digits, suffix = m.group(1), m.group(2)
        if "," in digits and not re.fullmatch(
            r"\d{1,3}(,\d{3})+(\.\d+)?", digits.split("e")[0].split("E")[0]
        ):
            digits = digits.split(",")[0]  # "3,4": a list, not a thousands separator
        plain = digits.replace("_", "").replace(",", "")
        try:
            value = float(plain) * _SUFFIX.get(suffix or "", 1.0)
        except ValueError:
            continue
        mantissa = re.split(r"[eE]", plain)[0].replace(".", "").lstrip("0")
        if "." not in plain.split("e")[0].split("E")[0]:
            # 140 or 40B: trailing zeros of a whole number are not digits
            mantissa = mantissa.rstrip("0")
        out.append((value, max(1, len(mantissa)), m.group(0)))
    return out


def _round(x: float, digits: int) -> float:
    return float(f"{x:.{digits - 1}e}")


def matches(written: float, digits: int, answer: float) -> bool:
    """Whether a number written with ``digits`` significant digits spells ``answer``.

    >>> matches(144.0, 3, 143.93), matches(1.439e2, 4, 143.93), matches(140.0, 2, 143.93), matches(6.3e24, 2, 6.3e24)
    (True, True, False, True)
    """
    if written == answer:
        return True
    return digits >= MIN_DIGITS and math.isclose(written, _round(answer, digits), rel_tol=1e-9)


def distinctive(answers: dict[str, dict], given: list[float]) -> dict[str, float]:
    """The answers to look for: finite numbers, not small whole numbers or short fractions, not given
    data, not a format's constants.

    >>> sorted(distinctive({"a": {"value": 143.93}, "b": {"value": 12}, "c": {"value": 0.25},
    ...                     "e4m3_max": {"value": 448.0}, "d": {"value": 989.5e12}}, given=[989.5e12]))
    ['a']
    """
    out = {}
    for name, entry in answers.items():
        v = entry["value"]
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v == 0:
            continue
        if FORMAT_FACTS.match(name):
            continue
        if float(v).is_integer() and abs(v) < MIN_WHOLE:
            continue
        if (
            not float(v).is_integer()
            and len(f"{float(v)!r}".split("e")[0].replace(".", "").replace("-", "").strip("0"))
            < MIN_DIGITS
        ):
            continue
        if any(math.isclose(v, g, rel_tol=1e-9) for g in given):
            continue
        out[name] = float(v)
    return out


def _given_numbers() -> list[float]:
    from cs336_staff.writeup.answers import GIVEN

    out: list[float] = []
    for value, _ in GIVEN.values():
        todo = (
            list(value.values())
            if isinstance(value, dict)
            else list(value)
            if isinstance(value, list)
            else [value]
        )
        out += [float(v) for v in todo if isinstance(v, int | float) and not isinstance(v, bool)]
    return out


def leaks(root: Path, files: list[str], answers: dict[str, float]) -> list[str]:
    """``file:line: 'as written' is answer NAME (value)`` for every spelling of an answer."""
    found = []
    for rel in files:
        if not rel.endswith((".py", ".md")):
            continue
        for lineno, line in enumerate(
            (root / rel).read_text(encoding="utf-8", errors="replace").splitlines(), 1
        ):
            for value, digits, text in numbers(line):
                for name, answer in answers.items():
                    if matches(value, digits, answer):
                        found.append(
                            f"{rel}:{lineno}: {text!r} is the answer key's {name} ({answer:g}); "
                            "change the writeup's inputs (GIVEN in cs336_staff/writeup/answers.py) or the example"
                        )
    return found


def check_answer_leaks(repo: Path, handout: Handout):  # noqa: ANN201 - a release Check (imported late: check.py imports this)
    from cs336_staff.writeup.answers import compute

    if not (Path(repo) / WRITEUP).is_file():
        return Check("answers", True, f"no {WRITEUP}, so no answer key to keep out of the handout")
    answers = distinctive(compute(repo), _given_numbers())
    found = leaks(handout.root, handout.files, answers)
    if found:
        return Check(
            "answers",
            False,
            f"{len(found)} numbers of the answer key appear in the handout",
            found[:50],
        )
    return Check(
        "answers",
        True,
        f"none of the {len(answers)} distinctive numbers of the answer key appears in the "
        "handout's code, docstrings or README, in any spelling",
    )
