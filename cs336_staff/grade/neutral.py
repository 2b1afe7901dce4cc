r"""Text from a submission, made inert wherever a report or a terminal shows it (the one home of it).

A submission's text (what it printed or raised, the names of the files it uploaded) reaches three
kinds of place, each with its own way to be turned against the reader:

* a terminal or a plain-text field (``console.txt``, ``run_autograder``'s stdout, a test's output in
  results.json, junit.xml): control characters move the cursor, clear the screen, retitle the window
  or make a link that says one thing and opens another (OSC 8). ``controls`` shows each as its escape
  (``\x1b``), keeping newlines and tabs; ``line`` escapes those too, for text that must stay one line;
* a field rendered as Markdown or HTML (``summary.md``; results.json's top-level ``output``, which
  Gradescope renders as ``output_format`` says: ``md``): ``markdown`` also makes inert every character
  that Markdown or HTML gives a meaning (``[x](javascript:...)``, ``<img src=x onerror=...>``,
  emphasis, a table's ``|``), so the text reads as written;
* a spreadsheet cell (gradebook.csv): a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a
  carriage return is a formula to Excel, LibreOffice and Google Sheets; ``cell`` puts a ``'`` in front,
  as OWASP's advice on CSV injection says.

Every function is idempotent on its own output but ``markdown`` (which escapes its own backslashes): apply
it once, where the text is rendered, to text as it came.

>>> line("\x1b]8;;https://evil\x07click\x1b]8;;\x07\nnext")
'\\x1b]8;;https://evil\\x07click\\x1b]8;;\\x07\\nnext'
>>> markdown("[x](javascript:alert(1)) <img src=x onerror=alert(1)>")
'\\[x\\](javascript:alert(1)) &lt;img src=x onerror=alert(1)&gt;'
>>> cell("-2-3"), cell("=HYPERLINK(1)"), cell("alice")
("'-2-3", "'=HYPERLINK(1)", 'alice')
"""

from __future__ import annotations

#: Characters Markdown (CommonMark, GitHub's tables and strikethrough) gives a meaning inside a line:
#: escaped with a backslash (``[`` and ``]`` make every link and image, ``<`` every autolink and tag,
#: so parentheses stay as they are). (A leading ``-``, ``+`` or ``1.`` would only nest a list: text here is
#: always set after a list's ``- `` or a table's ``| ``.)
MARKDOWN_SPECIAL = frozenset("\\`*_[]#!|~")
#: Characters HTML gives a meaning: written as entities (which Markdown shows as the character).
HTML_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
#: What makes a spreadsheet read a cell as a formula when the cell starts with it (OWASP).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _escape(c: str) -> str:
    if c in "\n\t\r":
        return repr(c)[1:-1]
    o = ord(c)
    if 0xDC80 <= o <= 0xDCFF:  # a byte that was not UTF-8, as os and surrogateescape decode it
        return f"\\x{o - 0xDC00:02x}"
    if o < 0x100:
        return f"\\x{o:02x}"
    return f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def controls(text: str, keep: str = "\n\t") -> str:
    r"""``text`` with every character that is not printable (control characters, ESC, DEL, the C1
    controls, bidirectional overrides, lone surrogates) shown as its escape; ``keep`` stays as it is.

    >>> controls("red \x1b[31mtext\x1b[0m\r\n\u202eevil")
    'red \\x1b[31mtext\\x1b[0m\\r\n\\u202eevil'
    """
    return "".join(c if c.isprintable() or c in keep else _escape(c) for c in text)


def line(text: str) -> str:
    """``controls`` with newlines and tabs escaped too: ``text`` as one line."""
    return controls(text, keep="")


def markdown(text: str) -> str:
    """``line(text)`` made inert in Markdown and HTML: it renders as the characters it has."""
    return "".join(
        HTML_ENTITIES.get(c) or (f"\\{c}" if c in MARKDOWN_SPECIAL else c) for c in line(text)
    )


def cell(text: str) -> str:
    """``line(text)`` as a spreadsheet cell that no spreadsheet reads as a formula."""
    text = line(text)
    return f"'{text}" if text.startswith(FORMULA_START) else text
