"""No number of the answer key appears in what the handout ships (``cs336 release --check``: answers).

The written problems ask about other inputs than the worked examples in the docstrings (see
``GIVEN`` in ``cs336_staff/writeup/answers.py``), so that an answer is computed, not copied. This
check keeps it so: every distinctive number of the key (``answers.compute()``) is looked for in
every file of the handout that is text (code, docstrings, doctests, tests, fixtures, README,
configuration) and in the words of ``assignment.pdf`` (``pdf_text``), in any spelling:

    decimals     143.9, 143.93, 1.439e2, 1.4393e+02, 448, 448.0, 4.48e2, 4.480e+02
    separators   1,011   1_011   40_000_000_000   and suffixes 40B, 6.3T, 120K
    percentages  79.7% (the answer 0.7974), 12.6 %
    fractions    1/128, 1 / 128 (the answer 0.0078125), and powers 2**-7, 2^-7, 2^(-7), 1/2**7
    sequences    (12, 4, 1), (12,4,1), [12, 4, 1], torch.Size([12, 4, 1]), stride 12, 4, 1

The rule for what counts (so that the numbers every code base is full of raise no false alarm):

- A written number spells an answer when it equals it (fractions and powers must be exact), or
  when it has at least ``MIN_DIGITS`` significant digits and is the answer rounded to that many
  (``144`` and ``143.9`` spell 143.93; ``140`` does not), and the rounded value is itself
  distinctive (``1.000`` or ``100.0%`` do not spell 1.0000535). Signs are ignored.
- Whole-number answers are distinctive from ``MIN_WHOLE`` up (448 and 1011 are; 12 bytes, 7 GPUs
  and 96 bytes are not), except powers of two and one less (256, 255, 4096: sizes and masks).
- Other answers are distinctive when their shortest spelling has at least ``MIN_DIGITS``
  significant digits (0.0078125 and 0.797 are; 0.25 and 0.5 are not: a quarter is everywhere).
- A sequence answer (strides, a shape) counts as a whole: the same numbers in the same order,
  any brackets and spacing, and only if it has two entries or more that are not all equal
  ((12, 1, 4) is distinctive, (2, 2, 2) is not). Its entries are not looked for one by one.
- An answer the key prints otherwise than its value (``gpus_needed`` is 1010.02, printed 1011:
  rounded up) is looked for in both forms, when the printed form is one plain number that is not
  the value in other units (989.5 TFLOP/s) or rounded (41.4 days).
- Numbers that are given data (``GIVEN``: the problems' inputs, datasheet peaks) are not answers.
- Data files (``DATA_SUFFIXES`` under ``fixtures/``: corpora, snapshots) count exact spellings only:
  a corpus sentence's "295" is chance, not the ridge point 295.37 rounded. ``uv.lock`` (hashes,
  sizes, versions that a tool writes) is not read.

Non-distinctive answers are left to the problems' design: a problem must not be answered by any
docstring, whether or not this check can see it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

from cs336_staff.release.pdf_text import pdf_text
from cs336_staff.release.results import Check, Handout

#: The writeup whose answer key (cs336_staff/writeup/answers.py) the check reads.
WRITEUP = "writeup/assignment.typ"
#: A rounded number must keep this many significant digits to count as a spelling of an answer.
MIN_DIGITS = 3
#: Whole-number answers below this are not distinctive (12 bytes, 7 GPUs, 96 bytes) and are not looked for.
MIN_WHOLE = 100
#: A handout file larger than this is not text a student reads (a corpus, a tensor dump) and is skipped.
MAX_BYTES = 5_000_000

#: Under fixtures/, files with these suffixes are data (corpora, snapshots): exact spellings only.
DATA_SUFFIXES = (".txt", ".json", ".jsonl", ".csv", ".npy", ".pt")
#: Files a tool writes, not read by students: not searched.
SKIP = ("uv.lock",)

Answer = float | tuple[float, ...]

_SUFFIX = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}
_NUM = r"\d(?:[\d_]|,(?=\d))*(?:\.\d+)?(?:[eE][-+]?\d+)?"
_NUMBER = re.compile(rf"(?<![\w.])({_NUM})(?:([KMBT])(?![A-Za-z])|\s?(%))?")
_INT = r"[-−]?\d+"
_POWER = re.compile(
    rf"(?<![\w.])(?:(\d+(?:\.\d+)?)\s*([*/])\s*)?(\d+)\s*(?:\*\*|\^)\s*(\(\s*{_INT}\s*\)|{_INT})"
)
_FRACTION = re.compile(r"(?<![\w./])(\d+)\s*/\s*(\d+)(?![\w.]|\s*(?:\*\*|\^))")
_ELEMENT = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_SEQUENCE = re.compile(rf"(?<![\w.]){_ELEMENT}(?:\s*,\s*{_ELEMENT})+(?![\w.])")


def _digits(plain: str) -> int:
    """Significant digits of a plain decimal (``0.0078125``: 5; ``140``: 2; ``140.0``: 4)."""
    mantissa = re.split(r"[eE]", plain)[0]
    digits = mantissa.replace(".", "").lstrip("0")
    if "." not in mantissa:
        digits = digits.rstrip("0")  # 140 or 40B: trailing zeros of a whole number are not digits
    return max(1, len(digits))


def numbers(text: str) -> list[tuple[float, int | None, str]]:
    """Every number written in ``text``: (value, significant digits or None if exact, as written).

    >>> [(v, d) for v, d, _ in numbers("about 144 days, 6.3e+24 FLOPs, 40B, 1,011 GPUs, v2.0")]
    [(144.0, 3), (6.3e+24, 2), (40000000000.0, 1), (1011.0, 4)]
    >>> [(v, d) for v, d, _ in numbers("79.7% of 2**-7 and 1/128, 1.75 * 2^(8)") if d != 1]
    [(0.797, 3), (128.0, 3), (1.75, 3), (0.0078125, None), (448.0, None), (0.0078125, None)]
    """
    out: list[tuple[float, int | None, str]] = []
    for m in _NUMBER.finditer(text):
        digits, suffix, percent = m.groups()
        if "," in digits and not re.fullmatch(
            r"\d{1,3}(,\d{3})+(\.\d+)?", re.split("[eE]", digits)[0]
        ):
            digits = digits.split(",")[0]  # "3,4": a list, not a thousands separator
        plain = digits.replace("_", "").replace(",", "")
        try:
            value = float(plain) * _SUFFIX.get(suffix or "", 1.0) / (100.0 if percent else 1.0)
        except ValueError:
            continue
        out.append((value, _digits(plain), m.group(0)))
    for m in _POWER.finditer(text):
        factor, op, base, exponent = m.groups()
        k = int(exponent.strip("() ").replace("−", "-"))
        if abs(k) > 1100:
            continue
        power = Fraction(int(base)) ** k
        if factor is not None:
            power = power * Fraction(factor) if op == "*" else Fraction(factor) / power
        out.append((float(power), None, m.group(0)))
    for m in _FRACTION.finditer(text):
        if int(m.group(2)) != 0:
            out.append((int(m.group(1)) / int(m.group(2)), None, m.group(0)))
    return out


def sequences(text: str) -> list[tuple[tuple[float, ...], str]]:
    """Every comma-separated run of numbers in ``text``, whole: ``[(12.0, 4.0, 1.0), ...]``.

    >>> [s for s, _ in sequences("x.stride() == (12,4,1); torch.Size([2, 3])")]
    [(12.0, 4.0, 1.0), (2.0, 3.0)]
    """
    return [
        (tuple(float(x) for x in re.split(r"\s*,\s*", m.group(0))), m.group(0))
        for m in _SEQUENCE.finditer(text)
    ]


def _round(x: float, digits: int) -> float:
    return float(f"{x:.{digits - 1}e}")


def matches(written: float, digits: int | None, answer: float) -> bool:
    """Whether a number written with ``digits`` significant digits (None: exact) spells ``answer``.

    >>> matches(144.0, 3, 143.93), matches(1.439e2, 4, 143.93), matches(140.0, 2, 143.93), matches(6.3e24, 2, 6.3e24)
    (True, True, False, True)
    """
    written, answer = abs(written), abs(answer)
    if math.isclose(written, answer, rel_tol=1e-12):
        return True
    if digits is None or digits < MIN_DIGITS:
        return False
    rounded = _round(answer, digits)
    return math.isclose(written, rounded, rel_tol=1e-9) and _distinctive_number(rounded)


def _same_but_units(printed: float, digits: int, value: float) -> bool:
    """Whether the key prints ``value`` as ``printed`` (with ``digits`` significant digits) by a
    change of unit (989.5 TFLOP/s), or a rounding that the rounded spellings cover (41.4 days)."""
    if value == 0 or printed == 0:
        return printed == value
    for k in range(-8, 9):
        scaled = value / 10.0 ** (3 * k)
        if math.isclose(printed, scaled, rel_tol=1e-12) or math.isclose(
            printed, _round(scaled, digits), rel_tol=1e-9
        ):
            return True
    return False


def _power_of_two_or_mask(v: float) -> bool:
    n = int(abs(v))
    return n > 0 and (n & (n - 1) == 0 or n & (n + 1) == 0)


def _distinctive_number(v: object) -> bool:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v == 0:
        return False
    if float(v).is_integer():
        return abs(v) >= MIN_WHOLE and not _power_of_two_or_mask(v)
    return _digits(repr(abs(float(v))).replace("e-", "e").split("e")[0]) >= MIN_DIGITS


def distinctive(answers: dict[str, dict], given: list[float]) -> dict[str, Answer]:
    """The answers to look for (the rule in the module docstring).

    >>> sorted(distinctive({"a": {"value": 143.93}, "b": {"value": 12}, "c": {"value": 0.25},
    ...                     "e4m3_max": {"value": 448.0}, "d": {"value": 989.5e12}, "m": {"value": 255},
    ...                     "s": {"value": [12, 4, 1]}, "z": {"value": [2, 2, 2]}}, given=[989.5e12]))
    ['a', 'e4m3_max', 's']
    """
    out: dict[str, Answer] = {}
    for name, entry in answers.items():
        v = entry["value"]
        if isinstance(v, list | tuple):
            if (
                len(v) >= 2
                and all(isinstance(x, int | float) and not isinstance(x, bool) for x in v)
                and len(set(v)) > 1
            ):
                out[name] = tuple(float(x) for x in v)
            continue
        printed = [n for n in numbers(str(entry.get("text", ""))) if n[1] is not None]
        shown = _round(*printed[0][:2]) if len(printed) == 1 else None  # type: ignore[arg-type]
        for label, x in ((name, v), (f"{name} as printed", shown)):
            if label != name and (shown is None or _same_but_units(shown, printed[0][1], v)):  # type: ignore[arg-type]
                continue
            if not _distinctive_number(x) or any(math.isclose(x, g, rel_tol=1e-9) for g in given):  # type: ignore[arg-type]
                continue
            out[label] = float(x)  # type: ignore[arg-type]
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


def _hint(name: str) -> str:
    return (
        f"change the example, or the problem that asks for {name} "
        "(its inputs: GIVEN in cs336_staff/writeup/answers.py; its text: writeup/assignment.typ)"
    )


def leaks_in_text(
    where: str, text: str, answers: dict[str, Answer], *, exact_only: bool = False
) -> list[str]:
    """``WHERE: 'as written' is the answer key's NAME (value); ...`` for every spelling of an answer
    in ``text``, line by line (``exact_only``: a rounded spelling does not count)."""
    scalars = {k: v for k, v in answers.items() if isinstance(v, float)}
    tuples = {k: v for k, v in answers.items() if isinstance(v, tuple)}
    found = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not any(c.isdigit() for c in line):
            continue
        at = f"{where}:{lineno}" if "\n" in text else where
        for value, digits, written in numbers(line):
            for name, answer in scalars.items():
                if matches(value, None if exact_only else digits, answer):
                    found.append(
                        f"{at}: {written!r} is the answer key's {name} ({answer:g}); {_hint(name)}"
                    )
        for seq, written in sequences(line):
            for name, answer_seq in tuples.items():
                if seq == answer_seq:
                    shown = ", ".join(f"{x:g}" for x in answer_seq)
                    found.append(
                        f"{at}: {written!r} is the answer key's {name} ({shown}); {_hint(name)}"
                    )
    return found


def _texts(root: Path, files: list[str]) -> Iterator[tuple[str, str]]:
    """(where, text) for every handout file a student can read: text files, and each PDF page."""
    for rel in files:
        path = root / rel
        if rel in SKIP or not path.is_file() or path.stat().st_size > MAX_BYTES:
            continue
        data = path.read_bytes()
        if rel.endswith(".pdf"):
            for number, page in enumerate(pdf_text(data), 1):
                yield f"{rel} page {number}", page.replace("\n", " ")  # a number may wrap
            continue
        if b"\0" in data:
            continue  # binary: a tensor, an archive
        try:
            yield rel, data.decode("utf-8")
        except UnicodeDecodeError:
            continue


def leaks(root: Path, files: list[str], answers: dict[str, Answer]) -> list[str]:
    """Every spelling of an answer in the handout's files (``root``-relative)."""
    return [
        f
        for where, text in _texts(root, files)
        for f in leaks_in_text(
            where,
            text,
            answers,
            exact_only=where.startswith("fixtures/") and where.endswith(DATA_SUFFIXES),
        )
    ]


def check_answer_leaks(repo: Path, handout: Handout):  # noqa: ANN201 - a release Check (imported late: check.py imports this)
    from cs336_staff.writeup.answers import compute

    if not (Path(repo) / WRITEUP).is_file():
        return Check("answers", True, f"no {WRITEUP}, so no answer key to keep out of the handout")
    answers = distinctive(compute(repo), _given_numbers())
    files = sorted(
        {*handout.files, *(str(p.relative_to(handout.root)) for p in handout.root.glob("*.pdf"))}
    )
    found = leaks(handout.root, files, answers)
    if found:
        return Check(
            "answers",
            False,
            f"{len(found)} spellings of the answer key's numbers appear in the handout",
            found[:50],
        )
    return Check(
        "answers",
        True,
        f"none of the {len(answers)} distinctive numbers of the answer key appears in the "
        f"handout's {len(files)} files (text and assignment.pdf's words), in any spelling",
    )
