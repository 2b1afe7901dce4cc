"""The text of a PDF that Typst wrote, page by page, for checks that read what students read.

Not a general PDF reader: enough for Typst's output (uncompressed object table, Flate-compressed
content streams, Type0 fonts with Identity-H encoding and a ``ToUnicode`` CMap, text drawn with
``Tj``/``TJ``). Each glyph is mapped back to its characters through its font's CMap, and placed
by the matrices and the fonts' widths: a glyph run back at the left on another baseline starts a
new line; one more than a fifth of an em right of the last, or a ``TJ`` gap that wide, a new word.
Superscripts lose their raise: ``2^(-7)`` reads ``2 -7``. The staff tests check the reader against
the writeup's own sentences (tests/staff/test_writeup.py).
"""

from __future__ import annotations

import re
import zlib

_OBJ = re.compile(rb"(\d+) 0 obj\s*(.*?)endobj", re.S)
_TOKEN = re.compile(
    rb"<([0-9A-Fa-f]*)>"  # hex string
    rb"|(\()"  # literal string: scanned by _literal_end (parentheses nest)
    rb"|\[|\]"
    rb"|/([^\s/<>\[\]()]+)"  # name
    rb"|(-?\d*\.?\d+)"  # number
    rb"|([A-Za-z*'\"]+)",  # operator
    re.S,
)
_ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f"}
#: A ``TJ`` adjustment (thousandths of an em, negative = move right) wider than this is a space.
_WORD_GAP = 200


def _objects(data: bytes) -> dict[int, tuple[bytes, bytes | None]]:
    """Object number -> (its dictionary, its decoded stream or None)."""
    out: dict[int, tuple[bytes, bytes | None]] = {}
    for m in _OBJ.finditer(data):
        body, stream = m.group(2), None
        start = body.find(b"stream")
        if start != -1:
            head, raw = body[:start], body[start + 6 :]
            raw = raw[2:] if raw[:2] == b"\r\n" else raw[1:] if raw[:1] == b"\n" else raw
            raw = raw[: raw.rfind(b"endstream")]
            if b"/FlateDecode" in head:
                raw = zlib.decompressobj().decompress(raw)
            body, stream = head, raw
        out[int(m.group(1))] = (body, stream)
    return out


def _cmap(stream: bytes) -> dict[int, str]:
    table: dict[int, str] = {}
    for block in re.findall(rb"beginbfchar(.*?)endbfchar", stream, re.S):
        for src, dst in re.findall(rb"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]*)>", block):
            table[int(src, 16)] = bytes.fromhex(dst.decode()).decode("utf-16-be", "replace")
    for block in re.findall(rb"beginbfrange(.*?)endbfrange", stream, re.S):
        for lo, hi, dst in re.findall(
            rb"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>", block
        ):
            for i, code in enumerate(range(int(lo, 16), int(hi, 16) + 1)):
                table[code] = chr(int(dst, 16) + i)
    return table


def _literal(raw: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(raw):
        if raw[i : i + 1] != b"\\":
            out += raw[i : i + 1]
            i += 1
            continue
        octal = re.match(rb"[0-7]{1,3}", raw[i + 1 : i + 4])
        nxt = raw[i + 1 : i + 2]
        if octal:
            out.append(int(octal.group(0), 8) & 0xFF)
            i += 1 + len(octal.group(0))
        else:
            out += _ESCAPES.get(nxt, b"" if nxt in (b"\n", b"\r") else nxt)
            i += 2
    return bytes(out)


def _ref(body: bytes, key: bytes) -> int | None:
    m = re.search(rb"/" + key + rb"\s*(\d+) 0 R", body)
    return int(m.group(1)) if m else None


def _literal_end(stream: bytes, start: int) -> int:
    """The index just past the literal string opening at ``stream[start] == b"("``."""
    depth, i = 0, start
    while i < len(stream):
        c = stream[i : i + 1]
        if c == b"\\":
            i += 2
            continue
        depth += {b"(": 1, b")": -1}.get(c, 0)
        i += 1
        if depth == 0:
            return i
    return i


def _widths(body: bytes) -> dict[int, float]:
    """A CIDFont's ``/W`` array: glyph id -> advance in thousandths of an em."""
    m = re.search(rb"/W\s*\[(.*)\]", body, re.S)
    out: dict[int, float] = {}
    if not m:
        return out
    items = re.findall(rb"\[([^\]]*)\]|(-?\d*\.?\d+)", m.group(1))
    pending: list[float] = []
    for group, number in items:
        if group:
            first = int(pending.pop())
            for i, w in enumerate(re.findall(rb"-?\d*\.?\d+", group)):
                out[first + i] = float(w)
            continue
        pending.append(float(number))
        if len(pending) == 3:
            lo, hi, w = pending
            for g in range(int(lo), int(hi) + 1):
                out[g] = w
            pending = []
    return out


Font = tuple[dict[int, str], dict[int, float]]
Matrix = tuple[float, float, float, float, float, float]
_IDENTITY: Matrix = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)


def _times(m: Matrix, n: Matrix) -> Matrix:
    a, b, c, d, e, f = m
    a2, b2, c2, d2, e2, f2 = n
    return (
        a * a2 + b * c2,
        a * b2 + b * d2,
        c * a2 + d * c2,
        c * b2 + d * d2,
        e * a2 + f * c2 + e2,
        e * b2 + f * d2 + f2,
    )


def _show(stream: bytes, fonts: dict[bytes, Font]) -> str:
    """The text a content stream draws: lines separated by newlines, words by spaces.

    Glyph runs are placed by the transformation matrices (``cm``, ``Tm``) and advanced by the
    fonts' widths: a run on another baseline that starts left of where the last one ended starts
    a new line; one on another baseline further right (a superscript), or more than a fifth of an
    em right of where the last one ended, starts a new word (Typst draws math glyph by glyph)."""
    text: list[str] = []
    font: Font = ({}, {})
    size = 10.0
    ctm, stack, tm = _IDENTITY, [], _IDENTITY
    last: tuple[float, float] | None = None  # where the previous run ended (x, baseline y)
    operands: list[tuple[str, object]] = []
    in_array = False
    pos = 0
    while (m := _TOKEN.search(stream, pos)) is not None:
        pos = m.end()
        hexs, paren, name, number, op = m.groups()
        if m.group(0) in (b"[", b"]"):
            in_array = m.group(0) == b"["
            continue
        if hexs is not None or paren is not None:
            if paren is not None:
                pos = _literal_end(stream, m.start())
                codes = _literal(stream[m.start() + 1 : pos - 1])
            else:
                codes = bytes.fromhex(hexs.decode())
            glyphs = [int.from_bytes(codes[i : i + 2], "big") for i in range(0, len(codes) - 1, 2)]
            operands.append(("s", glyphs))
            continue
        if name is not None:
            operands.append(("n", name))
            continue
        if number is not None:
            operands.append(("f", float(number)))
            continue
        if in_array:
            continue
        numbers = [float(v) for k, v in operands if k == "f"]  # type: ignore[arg-type]
        if op == b"q":
            stack.append(ctm)
        elif op == b"Q" and stack:
            ctm = stack.pop()
        elif op == b"cm" and len(numbers) >= 6:
            ctm = _times(tuple(numbers[-6:]), ctm)  # type: ignore[arg-type]
        elif op == b"BT":
            tm = _IDENTITY
        elif op == b"Tm" and len(numbers) >= 6:
            tm = tuple(numbers[-6:])  # type: ignore[assignment]
        elif op in (b"Td", b"TD") and len(numbers) >= 2:
            tm = _times((1.0, 0.0, 0.0, 1.0, numbers[-2], numbers[-1]), tm)
        elif op == b"Tf":
            names = [v for k, v in operands if k == "n"]
            font = fonts.get(names[-1], ({}, {})) if names else ({}, {})  # type: ignore[call-overload]
            size = numbers[-1] if numbers else size
        elif op in (b"Tj", b"TJ"):
            full = _times(tm, ctm)
            x, y = full[4], full[5]
            em = size * (abs(full[0]) or 1.0)
            if last is not None and abs(y - last[1]) > 0.3 * em and x < last[0] - 0.5 * em:
                text.append("\n")  # another baseline, back to the left: a new line
            elif last is not None and (abs(y - last[1]) > 0.3 * em or x - last[0] > 0.2 * em):
                text.append(" ")
            advance = 0.0
            for kind, value in operands:
                if kind == "s":
                    for g in value:  # type: ignore[attr-defined]
                        text.append(font[0].get(g, ""))
                        advance += font[1].get(g, 0.0) / 1000 * em
                elif kind == "f":
                    advance -= float(value) / 1000 * em  # type: ignore[arg-type]
                    if float(value) < -_WORD_GAP:  # type: ignore[arg-type]
                        text.append(" ")
            last = (x + advance, y)
        operands = []
    lines = (re.sub(r"\s+", " ", line).strip() for line in "".join(text).split("\n"))
    return "\n".join(line for line in lines if line)


def pdf_text(data: bytes) -> list[str]:
    """The text of each page of a Typst PDF, in page order: one line of text per line of the page
    (a table row's cells on one line), words separated by single spaces."""
    objs = _objects(data)
    unicode: dict[int, Font] = {}
    for num, (body, _) in objs.items():
        cmap = _ref(body, b"ToUnicode")
        if cmap is not None and objs.get(cmap, (b"", None))[1] is not None:
            descendant = re.search(rb"/DescendantFonts\s*\[\s*(\d+) 0 R", body)
            widths = _widths(objs[int(descendant.group(1))][0]) if descendant else {}
            unicode[num] = (_cmap(objs[cmap][1] or b""), widths)
    root = next((b for b, _ in objs.values() if re.search(rb"/Type\s*/Pages\b", b)), b"")
    kids = re.search(rb"/Kids\s*\[(.*?)\]", root, re.S)
    order = [int(n) for n in re.findall(rb"(\d+) 0 R", kids.group(1))] if kids else []
    pages = []
    for num in order:
        body = objs[num][0]
        resources = objs[r][0] if (r := _ref(body, b"Resources")) is not None else body
        table = re.search(rb"/Font\s*<<(.*?)>>", resources, re.S)
        fonts = {
            name: unicode.get(int(n), ({}, {}))
            for name, n in (re.findall(rb"/([^\s/]+)\s*(\d+) 0 R", table.group(1)) if table else [])
        }
        contents = re.search(rb"/Contents\s*(?:\[(.*?)\]|(\d+) 0 R)", body, re.S)
        streams = (
            [
                int(n)
                for n in re.findall(rb"(\d+) 0 R", contents.group(1) or contents.group(2) + b" 0 R")
            ]
            if contents
            else []
        )
        pages.append("\n".join(_show(objs[s][1] or b"", fonts) for s in streams))
    return pages
