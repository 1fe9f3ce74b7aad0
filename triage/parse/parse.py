"""Lines to events: a cheap anchor scan, then lark (LALR) on the text from each anchor.

Each start rule of `vllm_log.lark` begins with a terminal; those first terminals are the
anchors (`grammar.py` reads them off the grammar, so the two cannot drift apart; the
words the search starts from are `vocabulary.py`'s). The anchor search finds which rules a
line can feed; lines with no anchor never reach the parser. A line the grammar does not
accept is simply not an event.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from functools import cache, lru_cache

from msgspec.structs import replace

from triage.ingest.lines import Line
from triage.ingest.periodic import metrics_item
from triage.model import events as ev
from triage.model.events.base import KINDS
from triage.parse.grammar import AT_START_ONLY, PHASE_CALLS, START_RULES, anchor_groups, grammar
from triage.parse.lark_runtime import LarkError, Token, Tree, VisitError
from triage.parse.transform import TRANSFORMER
from triage.parse.vocabulary import matcher, word_groups
from triage.patterns import LazyPattern

_WS = LazyPattern(r"\s+")
# Source lines that still state something: a worker method dispatched by name, a phase call.
_RPC = re.compile(r"(?:_run_workers|collective_rpc|execute_method|run_method|" + "|".join(PHASE_CALLS) + r")\(")
# Python source quoted under a traceback frame: indented, and a statement, an assignment or a call.
_SOURCE_CODE = re.compile(
    r"\s{4,}(?:(?:raise|assert|return|yield|if|elif|while|for|with|await|del|logger\.\w+|print)\b"
    r"|[\w.\[\]]+\s*[-+*/|]?=(?!=)|[\w.]+\(|[frb]?[\"'])"
)
_CONTROL = LazyPattern(r"[\x00-\x08\x0b-\x1f\x7f]")
MAX_RETRIES = 4
MAX_ANCHORS_PER_RULE = 3
MAX_ANCHORS_PER_LINE = 64
NEAR_END = 60  # a parse error this close to the end means the line was cut, not that it is another message


def _anchor_candidates(text: str) -> list[tuple[int, tuple[int, ...]]]:
    """Every position where an anchor match may begin (a superset), with the groups that may
    match there in search order: from the positions of the prefilter words in the text."""
    info = word_groups()
    at: dict[int, set[int]] = {}
    walked: set[tuple[int, int, int]] = set()  # (group, lookback, position) already walked back from
    for start, word in matcher().occurrences(text):
        for order, back in info.get(word, ()):
            at.setdefault(start, set()).add(order)
            j = start
            # Walk back over the characters the match may hold before the word; stop where a
            # walk of the same kind already went (else a long run of words is quadratic).
            while back is not None and j > 0 and (order, id(back), j) not in walked and back.match(text, j - 1):
                walked.add((order, id(back), j))
                j -= 1
                at.setdefault(j, set()).add(order)
    return [(p, tuple(sorted(at[p]))) for p in sorted(at)]


def _search(text: str, pos: int, candidates: list[tuple[int, tuple[int, ...]]]) -> re.Match[str] | None:
    """`anchors()[0].search(text, pos)`, trying only candidate positions and groups."""
    for p, orders in candidates[bisect_left(candidates, (pos,)) :]:
        for order in orders:
            m = _group_pattern(order).match(text, p)
            if m:
                return m
    return None


@cache
def _group_pattern(order: int) -> re.Pattern[str]:
    return re.compile(anchor_groups()[0][order][2])


def normalise(text: str) -> str:
    """Collapse whitespace and drop control bytes so literal phrases match as printed."""
    if "\x00" in text or "\x1b" in text:
        text = _CONTROL.sub("", text)
    return " ".join(text.split())  # what `_WS.sub(" ", text).strip()` gives, several times faster


def parse_line(line: Line) -> list[ev.Event]:
    """Every event a line states (often none). Never raises on odd input."""
    return parse_line_detail(line)[0]


# Texts parsed lately and what they gave: a restart loop prints the same startup again and
# again, and tracebacks repeat their frames; an event depends on its line only through the
# line's number, origin and pid (`_build`), which a copy takes from the new line.
_SEEN: dict[str, tuple[list[ev.Event], bool]] = {}
MAX_SEEN, MAX_SEEN_CHARS = 2048, 2000


def parse_line_detail(line: Line) -> tuple[list[ev.Event], bool]:
    """Events, and whether some message ran into the end of the line (a wrap or a cut)."""
    seen = _SEEN.get(line.text)
    if seen is not None:
        return [replace(e, line=line.no, origin=line.origin, pid=line.pid) for e in seen[0]], seen[1]
    out = _parse_line_detail(line)
    if len(line.text) <= MAX_SEEN_CHARS:
        if len(_SEEN) >= MAX_SEEN:
            _SEEN.clear()
        _SEEN[line.text] = out
    return out


def _parse_line_detail(line: Line) -> tuple[list[ev.Event], bool]:
    if _SOURCE_CODE.match(line.text) and not _RPC.search(line.text):
        return [], False  # a traceback quoting source (`raise ValueError("No available memory ...`) states nothing
    text = normalise(line.text)
    if not text:
        return [], False
    quick = metrics_item(text)  # the periodic metrics line: one pattern, the grammar's event
    if quick is not None:
        return [_build(quick, line, False)], False
    names = anchor_groups()[1]
    tries: dict[str, list[int]] = {}
    pos, found = 0, 0
    candidates = _anchor_candidates(text)
    while found < MAX_ANCHORS_PER_LINE and (m := _search(text, pos, candidates)):
        rule = names[m.lastgroup or ""]
        found += 1
        # A start-of-message anchor (an exception name) may hide another inside it
        # ("zmq.error.ZMQError: Address already in use"): look again just after its start.
        pos = m.start() + 1 if rule in AT_START_ONLY else max(m.end(), m.start() + 1)
        if rule in AT_START_ONLY and m.start() != 0:
            continue
        starts = tries.setdefault(rule, [])
        if len(starts) < MAX_ANCHORS_PER_RULE:
            starts.append(m.start())
    out: list[ev.Event] = []
    ran_out = False
    for rule, starts in tries.items():
        for pos in starts:  # the first occurrence that parses wins
            made, cut_short = _parse_from(rule, text[pos:], line)
            ran_out = ran_out or cut_short
            if made:
                out.extend(made)
                break
    return out, ran_out


def _parse_from(rule: str, text: str, line: Line) -> tuple[list[ev.Event], bool]:
    """Parse; when the text was cut short, retry on the longest prefix that ends a clause.

    Returns the events and whether the text ran out before the message did.
    """
    truncated = ran_out = False
    for attempt in range(MAX_RETRIES):
        try:
            tree = _quick_tree(rule, text) or grammar().parse(text, start=rule)
        except LarkError as exc:
            pos = _error_pos(exc, text)
            if attempt == 0 and pos >= len(text) - NEAR_END:
                ran_out = True
            cut = _clause_boundary(text, pos)
            if cut is None:
                return [], ran_out
            text, truncated = cut, True
            continue
        except (ValueError, ArithmeticError, OverflowError):
            return [], False
        try:
            made = TRANSFORMER.transform(tree)
        except VisitError as exc:
            # lark wraps a callback's exception: a transformer that rejects a match (or a
            # figure that does not convert) means "not this message", never "cut short"
            if isinstance(exc.orig_exc, (ValueError, ArithmeticError, OverflowError)):
                return [], False
            raise
        events = [_build(item, line, truncated) for item in (made if isinstance(made, list) else [made]) if item]
        return events, ran_out
    return [], ran_out


@lru_cache(maxsize=1)
def _simple_rules() -> dict[str, tuple[str, str, str, bool, bool]]:
    """Start rules of the shape `rule: HEAD TAIL?` (one named terminal, then the rest of the line).

    Such a rule's tree is the head's match and the text after it, so it is built without
    running the parser: most anchor lines of a long log (metrics lines, progress bars) are
    of this kind. rule -> (head regex, head name, tree name, may have a tail, may lack one).
    """
    lark = grammar()
    terminals = {t.name: t for t in lark.terminals}
    forms: dict[str, set[tuple]] = {}
    starts = frozenset(START_RULES)  # a rule's name is a lark Token: `in` a tuple ran its __eq__ 12 000 times
    for r in lark.rules:
        if r.origin.name in starts:
            names = tuple(sym.name for sym in r.expansion)
            forms.setdefault(r.origin.name, set()).add((names[:1], names[1:], r.alias))
    out = {}
    for rule, shapes in forms.items():
        heads, tails, aliases = ({f[i] for f in shapes} for i in range(3))
        if len(heads) != 1 or len(aliases) != 1 or not tails <= {(), ("TAIL",)}:
            continue
        (head,) = next(iter(heads)) or ("",)
        if head.startswith("_") or head not in terminals or head == "TAIL":
            continue
        out[rule] = (
            terminals[head].pattern.to_regexp(),
            head,
            next(iter(aliases)) or rule,
            ("TAIL",) in tails,
            () in tails,
        )
    return out


@cache
def _compiled(regexp: str) -> re.Pattern[str]:
    return re.compile(regexp)


# A traceback frame in its canonical form: most parsed lines of a crash are frames. Anything
# else (a tab, a missing space, a cut line) goes to lark; a test holds the two to one tree.
_FRAME = re.compile(r'(File "[^"]*"), line (\d+), in ([^\s]+)(?: +([^ ].*))?[ ]*\Z')


def _quick_frame(text: str) -> Tree | None:
    m = _FRAME.match(text)
    if m is None:
        return None
    children = [Token("FRAME_FILE", m.group(1)), Token("INT", m.group(2)), Token("FUNC", m.group(3))]
    if m.group(4) is not None:
        children.append(Token("TAIL", m.group(4)))
    return Tree("frame", children)


def _quick_tree(rule: str, text: str) -> Tree | None:
    """The tree lark would build for a `HEAD TAIL?` rule or a canonical frame, or None (then
    lark parses)."""
    if rule == "frame":
        return _quick_frame(text)
    shape = _simple_rules().get(rule)
    if shape is None:
        return None
    regexp, head, name, with_tail, bare = shape
    m = _compiled(regexp).match(text)
    if m is None:
        return None
    rest = text[m.end() :].lstrip(" ")
    if rest and with_tail:
        return Tree(name, [Token(head, m.group()), Token("TAIL", rest)])
    if not rest and bare:
        return Tree(name, [Token(head, m.group())])
    return None


def _error_pos(exc: LarkError, text: str) -> int:
    token = getattr(exc, "token", None)
    if token is not None and getattr(token, "type", "") == "$END":
        return len(text)
    if token is not None and getattr(token, "start_pos", None) is not None:
        return int(token.start_pos)
    pos = getattr(exc, "pos_in_stream", None)
    return int(pos) if pos is not None else len(text)


def _clause_boundary(text: str, pos: int) -> str | None:
    """The text up to the last sentence/clause end before the failure position."""
    pos = pos if 0 < pos <= len(text) else len(text)
    for sep, keep in ((". ", 1), ("; ", 0), (", ", 0)):  # a sentence keeps its period, a clause drops its comma
        i = text.rfind(sep, 0, pos)
        if i > 0:
            return text[: i + keep]
    return None


def _build(item: dict, line: Line, truncated: bool) -> ev.Event:
    kind = item.pop("kind")
    cls = EVENT_TYPES[kind]
    return cls(line=line.no, origin=line.origin, pid=line.pid, truncated=truncated, **item)


EVENT_TYPES: dict[str, type[ev.Event]] = KINDS  # every event class, by its kind (base.event fills it)
