"""A message template -> a bounded regular expression, or the reason it is too vague to keep.

Literal text is escaped with its whitespace runs made flexible (``\\s+``: a log may wrap or
re-indent a message); each formatted field is a bounded non-greedy group named after its
expression where that is a plain name (``self.max_model_len`` -> ``max_model_len``).  Fields
that open or close the template are left out of the pattern: the pattern is searched for in
a line, so they add nothing but cost.  No repeat is unbounded inside another: the only
repeats are ``\\s+`` (between literals) and ``.{0,FIELD}?`` (a field), never nested, and a
field is settled once (see `pattern`).
Each line of a multi-line message is a matcher of its own (a log prints each on its own line).
"""

from __future__ import annotations

import re

from templates import Part

FIELD = 200  # the longest text one formatted field may stand for
# ... except a field that lists a collection (the valid choices: `','.join(parsers)`,
# `list(registry.keys())`, `sorted(...)`): vLLM's lists of parsers or backends run past 200
FIELD_LIST = 1500
_LISTING = re.compile(r"\bjoin\(|\.keys\(\)|^(list|sorted|set|tuple)\(")
MIN_LONGEST = 12  # the longest literal run must be at least this long ...
MIN_LETTERS = 18  # ... and the literal text hold this many letters, or the template is too vague
MAX_FIELDS = 8  # more fields than this and the pattern is cut after the eighth's literal
PREFIX_LETTERS = 60  # letters of literal text after which the rest of a message is not required
_WORDY = re.compile(r"[A-Za-z]")


def lines_of(parts: list[Part]) -> list[list[Part]]:
    """The lines of a multi-line message: a log prints each on its own line."""
    lines: list[list[Part]] = [[]]
    for p in parts:
        if isinstance(p, str) and "\n" in p:
            for k, piece in enumerate(p.split("\n")):
                if k:
                    lines.append([])
                if piece:
                    lines[-1].append(piece)
        else:
            lines[-1].append(p)
    return [ln for ln in lines if ln]


def prefix(parts: list[Part]) -> list[Part]:
    """The message up to PREFIX_LETTERS letters of literal text (cut at a word's end): enough to
    tell it from any other, and what survives a pasted line cut short or a reworded tail."""
    out: list[Part] = []
    letters = 0
    for p in parts:
        if not isinstance(p, str):
            out.append(p)
            continue
        n = len(_WORDY.findall(p))
        if letters + n <= PREFIX_LETTERS:
            out.append(p)
            letters += n
            continue
        cut = 0
        for m in re.finditer(r"[A-Za-z]+", p):
            cut = m.end()
            letters += len(m.group())
            if letters >= PREFIX_LETTERS:
                break
        out.append(p[:cut])
        break
    return out


def literals(parts: list[Part]) -> list[str]:
    return [p for p in parts if isinstance(p, str)]


def too_vague(parts: list[Part]) -> str | None:
    """Why a template cannot be told from other text, or None when it can."""
    lits = [" ".join(s.split()) for s in literals(parts)]
    if not lits:
        return "no literal text"
    if max(len(s) for s in lits) < MIN_LONGEST:
        return f"longest literal under {MIN_LONGEST} characters"
    if sum(len(_WORDY.findall(s)) for s in lits) < MIN_LETTERS:
        return f"under {MIN_LETTERS} letters of literal text"
    return None


def longest_literal(parts: list[Part]) -> str:
    """The prefilter: the longest literal run, whitespace collapsed, as it must appear."""
    runs = [w for s in literals(parts) for w in re.split(r"\s{2,}|\n", s)]
    best = max((" ".join(r.split()) for r in runs), key=len, default="")
    return best


def pattern(parts: list[Part]) -> str:
    """The search pattern of a (one-line) template.

    A field and the literal after it are matched as ``(?=(?P<f>.{0,200}?)LIT)(?P=f)LIT``: the
    lookahead settles on the first place the literal follows and is never re-entered (what an
    atomic group does, in a form Python 3.10 reads), so a line full of the message's own
    words costs at most FIELD tries per field, not their product."""
    while parts and not isinstance(parts[0], str):
        parts = parts[1:]
    while parts and not isinstance(parts[-1], str):
        parts = parts[:-1]
    out: list[str] = []
    names: dict[str, int] = {}
    fields = 0
    pending: str | None = None  # a field's group name, waiting for the literal that closes it
    pending_list = False  # ... and whether that field lists a collection
    for i, p in enumerate(parts):
        if isinstance(p, str):
            lit = _literal(p, first=i == 0, last=i == len(parts) - 1)
            width = FIELD_LIST if pending_list else FIELD
            out.append(f"(?=(?P<{pending}>.{{0,{width}}}?){lit})(?P={pending}){lit}" if pending else lit)
            pending = None
            if fields >= MAX_FIELDS:
                break
        else:
            fields += 1
            pending = _group(p[0], names)
            pending_list = _LISTING.search(p[0]) is not None
    return "".join(out)


def _literal(text: str, first: bool, last: bool) -> str:
    if first:
        text = text.lstrip()
    if last:
        text = text.rstrip()
    chunks = re.split(r"(\s+)", text)
    return "".join(r"\s+" if c.isspace() else re.escape(c) for c in chunks if c)


def _group(expr: str, names: dict[str, int]) -> str:
    base = expr.rsplit(".", 1)[-1] if re.fullmatch(r"[A-Za-z_][\w.]*", expr) else "value"
    base = re.sub(r"\W", "_", base).strip("_")[:40] or "value"
    if base[0].isdigit():
        base = "v_" + base
    names[base] = names.get(base, 0) + 1
    return base if names[base] == 1 else f"{base}_{names[base]}"
