"""What a chat tool, an issue tracker or a browser does to a log on its way to us.

A person pastes a log (or one line of it) through Slack, Teams, Discord, IRC, a GitHub issue or
a web page, and the text arrives changed: HTML entities (`&gt;`, `&#39;`), a chat client's
typography (curly quotes, `…`, an em dash for a flag's `--`, non-breaking and zero-width
spaces), and marks before or around each line (a chat header `[10:42 AM] alice:`, IRC's
`<bob>`, `ts`'s `Dec 05 10:42:05`, an editor's gutter `  12 | `, a Markdown bullet or
single backticks). Fences, `<details>` and `> ` quotes need nothing here: they are lines of
their own or peeled already.

Each function here is called by `lines.peel` on one line, behind a plain test (non-ASCII
characters, an `&`, a first character) that ordinary log lines do not pass, so the cost stays
on the lines that carry such marks. Shapes only, never message wording.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from triage.patterns import LazyPattern

# Characters a chat client or rich-text editor puts in for plain ones (None: drop it).
_TYPOGRAPHY = str.maketrans(
    {
        "\u00a0": " ",  # no-break space
        "\u202f": " ",  # narrow no-break space
        "\u2007": " ",  # figure space
        "\u200b": None,  # zero-width space
        "\u200c": None,  # zero-width non-joiner
        "\u200d": None,  # zero-width joiner
        "\u2060": None,  # word joiner
        "\ufeff": None,  # a BOM in mid-text: a zero-width no-break space
        "\u00ad": None,  # soft hyphen
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u2026": "...",
    }
)
_TYPOGRAPHIC = frozenset(chr(c) for c in _TYPOGRAPHY)
# An en or em dash that a chat client made of a flag's `--` (at a word's start, before a flag's
# name), or of two of a run of hyphens (`—---BEGIN ... KEY-----`: the redactor knows the run).
_DASH_FLAG = LazyPattern(
    r"(?:(?<=\s)|(?<=^)|(?<=[\"'(\[=]))[\u2013\u2014](?=[a-z]{2})|[\u2013\u2014](?=[-\u2013\u2014])|(?<=-)[\u2013\u2014]"
)


def plain(text: str) -> str:
    """`text` with a chat client's typography undone (only non-ASCII lines are looked at)."""
    if text.isascii():
        return text
    if not _TYPOGRAPHIC.isdisjoint(text):
        text = text.translate(_TYPOGRAPHY)
    if "\u2013" in text or "\u2014" in text:
        text = _DASH_FLAG.sub("--", text)
    return text


_ENTITY = LazyPattern(r"&(?:(amp|lt|gt|quot|apos|nbsp)|#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6}));")
_NAMED = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'", "nbsp": " "}


def _entity(m: re.Match[str]) -> str:
    if m[1]:
        return _NAMED[m[1]]
    code = int(m[2]) if m[2] else int(m[3], 16)
    return chr(code) if 0 < code < 0x110000 and not 0xD800 <= code < 0xE000 else m[0]


def unescape_html(text: str) -> str:
    """`text` with the HTML entities a web page's copy keeps (`&gt;`, `&#39;`) as characters.
    Once only: `&amp;gt;` becomes `&gt;`, as the page showed it."""
    if "&" not in text or ";" not in text:
        return text
    return _ENTITY.sub(_entity, text)


# Marks before a line, each a shape a chat or terminal tool prints (never a log's own record).
# `[10:42 AM]`, `[10:42:05]`: a chat client's or IRC client's time; then, after it, a name and a colon.
_CHAT_TIME = LazyPattern(r"\[\d{1,2}:\d\d(?::\d\d)?(?: ?[AaPp]\.?[Mm]\.?)?\] ?")
_CHAT_NAME = LazyPattern(r"(?P<name>[A-Za-z][\w.\-]{0,31}(?: [A-Z][\w.\-]{0,31})?): (?=\S)")
_NOT_A_NAME = ("Error", "Exception", "Warning", "INFO", "DEBUG", "ERROR", "WARNING", "CRITICAL", "Traceback")
# IRC's `<nick> ` (and a client's `<@nick>`, `<+nick>`).
_IRC_NICK = LazyPattern(r"<[@+%~&]?[A-Za-z\[\]\\^{}|`_][\w\-\[\]\\^{}|`]{0,31}> ")
# `ts` (moreutils) and a multiplexer's log stamps: `Dec 05 10:42:05 `, `10:42:05 `.
_TS_STAMP = LazyPattern(r"(?:[A-Z][a-z]{2} [ \d]\d )?\d\d:\d\d:\d\d(?:\.\d+)? (?=\S| {2})")
# An editor's or pastebin's line-number gutter: `  12 | `, `12 │ `.
_GUTTER = LazyPattern(r" *\d{1,7} ?[|\u2502] ?")
# A Markdown bullet, peeled only where what follows opens a record by its own shape.
_BULLET = LazyPattern(r"[-*\u2022] ")
_QUALIFIED_ERROR = LazyPattern(r"[a-z_][\w.]{0,80}\.[A-Z]\w{0,60}(?:Error|Exception)(?::|$)")  # torch.OutOfMemoryError:


def peel_chat(text: str, starts_record: Callable[[str], bool]) -> str:
    """`text` without one chat mark at its start (and single backticks around it), else itself.
    `starts_record`: the line reader's test of a record's start (a bullet is peeled only before one)."""
    first = text[:1]
    if first == "`":
        if len(text) > 2 and text.endswith("`") and not text.startswith("``"):
            return text[1:-1]
        return text
    if first == "[":
        m = _CHAT_TIME.match(text)
        if m:
            rest = text[m.end() :]
            n = _CHAT_NAME.match(rest)
            if n and not n["name"].endswith(_NOT_A_NAME) and n["name"] not in _NOT_A_NAME:
                return rest[n.end() :]
            return rest
        return text
    if first == "<":
        m = _IRC_NICK.match(text)
        return text[m.end() :] if m else text
    if first in ("-", "*", "\u2022"):
        m = _BULLET.match(text)
        if m:
            rest = text[m.end() :]
            if rest.strip() and (starts_record(rest) or _QUALIFIED_ERROR.match(rest)):
                return rest
        return text
    if first == " " or first.isdigit():
        m = _GUTTER.match(text)
        if m and m.end() > 2:
            return text[m.end() :]
    if first.isdigit() or first.isupper():
        m = _TS_STAMP.match(text)
        if m:
            return text[m.end() :]
    return text
