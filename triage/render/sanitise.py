"""One guard for every text a report carries from its input, before any format lays it out.

Log lines, file names, model names and labels come from strangers. Written as they are, they
could drive the reader's terminal or the CI runner that prints them:

- control characters and escape sequences (a screen reset, a charset switch, an OSC 8 link,
  an OSC 52 clipboard write, a carriage return that hides the start of a line) are made
  visible as `\\x1b`, `\\r`, ...; so are C1 controls (`\\x9b` is a CSI on some terminals),
  line and paragraph separators, and lone surrogates (a file name's bytes that are not
  UTF-8, which no UTF-8 writer can encode: `\\xff`);
- bidirectional controls (U+202A-202E, U+2066-2069, U+200E/F, U+061C), which reorder what a
  reader sees ("Trojan source"), are shown as `\\u202e`;
- CI command syntaxes any runner would act on when the text reaches its stdout are defused
  with a space: GitHub's `::command::` (the runner acts on it at a line's start: so wherever
  no word glues it to what precedes; the C-plus-plus name `c10::Error` stays, and the terminal report,
  which folds words longer than a line, defuses a line its layout starts with `::`) and
  its older `##[command]` (acted on anywhere in a line), Azure Pipelines' `##vso[`, GitLab's
  `section_start:`/`section_end:` markers;
- in names (`name=True`: a file name, an input's name) tabs and newlines are escaped too, so
  a name stays on its line.

The tool's own words hold none of these, so running the guard over a whole report changes
only what came from the input; it is idempotent (its output holds nothing it would change).
"""

from __future__ import annotations

import re
from typing import Any

from msgspec import Struct
from msgspec.structs import replace

from triage.patterns import LazyPattern

BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
_CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff" + BIDI
_UNSAFE = LazyPattern(f"[{_CONTROL}]")
_UNSAFE_IN_NAME = LazyPattern(f"[\t\n{_CONTROL}]")
_CI = LazyPattern(
    # ::name where a line may start (after spaces, punctuation); not c10::Error::Error of C++
    r"(?<![\w:])::(?=[A-Za-z_])"
    r"|(?i:##(?=\[|vso\[))"  # GitHub's older ##[command], Azure's ##vso[
    r"|(?<=section_start):|(?<=section_end):"  # GitLab's collapsible sections
)
_DEFUSED = {"::": ": :", "##": "# #", ":": " :"}
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _visible(m: re.Match[str]) -> str:
    char = m.group()
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def clean(text: str, name: bool = False) -> str:
    """`text` safe to print anywhere: controls visible, bidi controls shown, CI commands defused."""
    if text.isprintable():
        if "::" not in text and "##" not in text and "section_" not in text:
            return text  # the common case, told by C-level scans
    elif name or not text.replace("\n", "").replace("\t", "").isprintable():
        text = text if name else text.replace("\r\n", "\n")  # a Windows line end is a line end
        text = (_UNSAFE_IN_NAME if name else _UNSAFE).sub(_visible, text)
    if "::" in text or "##" in text or "section_" in text:
        text = _CI.sub(lambda m: _DEFUSED[m.group()], text)
    return text


# Fields whose text is a name (a path, a label): kept on one line.
NAME_FIELDS = frozenset({"name"})


def clean_data(value: Any, name: bool = False) -> Any:
    """Every string inside a report, a record or plain data, cleaned; unchanged parts are
    returned as they are (no copy when nothing needs it)."""
    if isinstance(value, str):
        return clean(value, name)
    if isinstance(value, list):
        items = [clean_data(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=False)) else items
    if isinstance(value, tuple):
        cleaned = tuple(clean_data(v) for v in value)
        return value if all(a is b for a, b in zip(cleaned, value, strict=False)) else cleaned
    if isinstance(value, dict):
        pairs = {clean_data(k, True): clean_data(v) for k, v in value.items()}
        same = len(pairs) == len(value) and all(k in value and value[k] is v for k, v in pairs.items())
        return value if same else pairs
    if isinstance(value, Struct):
        changed = {}
        for field in value.__struct_fields__:
            old = getattr(value, field)
            new = clean_data(old, field in NAME_FIELDS)
            if new is not old:
                changed[field] = new
        return replace(value, **changed) if changed else value
    return value
