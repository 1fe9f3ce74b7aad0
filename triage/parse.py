"""Lines to events: a cheap anchor scan, then lark (LALR) on the text from each anchor.

Each start rule of `vllm_log.lark` begins with a terminal; those first terminals are the
anchors. One combined regex of all anchors, built from the grammar itself so the two
cannot drift apart, finds in one pass which rules a line can feed. Lines with no anchor
never reach the parser. A line the grammar does not accept is simply not an event.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from functools import lru_cache

from lark import Lark, Token, Tree
from lark.exceptions import LarkError, UnexpectedCharacters, VisitError

from . import events as ev
from . import events_layers
from .layer_hints import LAYER_HINT_LOOKBACK, LAYER_REGEX_HINTS
from .lines import Line
from .periodic import metrics_item
from .transform import TRANSFORMER

# Start rules, one per message family; the Transformer turns each into events.
START_RULES = (
    "oom", "cuda_error_oom", "cpu_alloc", "budget", "profile_split", "profile_results",
    "profile_time", "kv_memory", "kv_pinned", "kv_tokens", "max_concurrency", "blocks", "weights_v0", "kv_needed",
    "weights_v1", "startup_free", "profiling_error", "kv_error", "no_cache", "graph_start",
    "graph_done", "sampler_oom", "load_oom", "encoder_budget", "profile_start",
    "weights_start", "swap", "ready", "banner", "server_version", "logo_version", "arg_dump",
    "traceback", "frame", "chain", "exception", "wrapper", "address_in_use", "hub_http", "hub_gated",
    "hub_missing", "architecture", "not_divisible", "not_enough_gpus", "bf16_capability", "cc_below",
    "quant_capability", "driver", "nccl", "nccl_code", "nccl_watchdog", "shm", "host_memory", "killed",
    "usage_error", "arch_no_impl", "world_size", "exit_status", "rpc_call", "failed_procs",
    "arch_unknown_model_type", "divisibility", "dtype_for_quant", "dist_init", "systemd_restart", "systemd_exit",
    "systemd_oom", "phase_call", "crash", "exit_code", "supervisor",
    "mps_oom", "device_error", "loader", "package_mismatch", "no_gpu", "hub_offline",
    "model_missing", "files_corrupt", "disk_full", "not_writable", "config_invalid", "main_guard", "collective",
)
# Rules that only make sense at the start of a message (their anchors are generic words).
AT_START_ONLY = frozenset({"frame", "chain", "exception", "killed", "phase_call"})
_WS = re.compile(r"\s+")
# Functions whose call, quoted in a traceback's source line, names the phase (vllm_log.lark's
# PHASE_CALL lists the same; a test keeps the two equal).
PHASE_CALLS = ("warmup_kernels", "kernel_warmup", "capture_model", "profile_run", "_dummy_sampler_run",
               "_dummy_run", "determine_available_memory", "determine_num_available_blocks",
               "_initialize_kv_caches", "initialize_kv_cache", "load_model", "flashinfer_autotune")
# Source lines that still state something: a worker method dispatched by name, a phase call.
_RPC = re.compile(r"(?:_run_workers|collective_rpc|execute_method|run_method|"
                  + "|".join(PHASE_CALLS) + r")\(")
# Python source quoted under a traceback frame: indented, and a statement, an assignment or a call.
_SOURCE_CODE = re.compile(
    r"\s{4,}(?:(?:raise|assert|return|yield|if|elif|while|for|with|await|del|logger\.\w+|print)\b"
    r"|[\w.\[\]]+\s*[-+*/|]?=(?!=)|[\w.]+\(|[frb]?[\"'])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
MAX_RETRIES = 4
MAX_ANCHORS_PER_RULE = 3
MAX_ANCHORS_PER_LINE = 64
NEAR_END = 60  # a parse error this close to the end means the line was cut, not that it is another message


@lru_cache(maxsize=1)
def grammar() -> Lark:
    """The grammar, built once per process (and cached on disk by lark between runs)."""
    lark = Lark.open_from_package(
        "triage", "vllm_log.lark", parser="lalr", start=list(START_RULES), cache=_cache_path()
    )
    _skip_root_lexer(lark)
    return lark


class _NoRootLexer:
    """Stands in for the contextual lexer's root lexer, which lark builds (all 185 terminals:
    about 25 ms) at the first character no state expects, only to reword the error. Raising
    UnexpectedCharacters makes lark raise its original error, at the same position: the
    only thing `_error_pos` reads."""

    def next_token(self, lex_state, parser_state=None):
        raise UnexpectedCharacters(" ", 0, 1, 1)


def _skip_root_lexer(lark: Lark) -> None:
    lexer = getattr(getattr(lark, "parser", None), "lexer", None)
    if hasattr(lexer, "root_lexer"):  # lark's ContextualLexer; another lexer keeps its ways
        lexer.root_lexer = _NoRootLexer()


def _cache_path() -> str | bool:
    from .cache import grammar_cache

    return grammar_cache("vllm_log.lark")  # named by the grammar's content


@lru_cache(maxsize=1)
def anchors() -> tuple[re.Pattern[str], dict[str, str]]:
    """One regex with a named group per start rule, from each rule's first terminals."""
    groups, names = anchor_groups()
    return re.compile("|".join(source for _, _, source in groups)), names


@lru_cache(maxsize=1)
def anchor_groups() -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """(group name, start rule, regex source) in search order, and group name -> rule.

    `anchors()` joins them into one pattern; the line parser compiles only the groups a log
    needs (compiling the whole pattern costs more than parsing a small log)."""
    lark = grammar()
    terminals = {t.name: t for t in lark.terminals}
    first = _first_terminals(lark)
    groups, names = [], {}
    # Generic start-of-message anchors (exception names, frames) go last, so at a position
    # where a specific phrase also starts, the specific one is what the search reports.
    ordered = sorted(enumerate(START_RULES), key=lambda ir: ir[1] in AT_START_ONLY)
    for i, rule in ordered:
        pats = []
        for term in sorted(first[rule]):
            regexp = terminals[term].pattern.to_regexp()
            pats.append(f"(?<!{RUN_HEADS[term]})(?:{regexp})" if term in RUN_HEADS else regexp)
        group = f"a{i}"
        names[group] = rule
        groups.append((group, rule, f"(?P<{group}>{'|'.join(pats)})"))
    return groups, names


# Anchors that open with a repeated class (`[\w.\-]+: error: `, `\d+ is not divisible`): a search
# tries them from every offset of a long word, quadratic in its length (one 64 KiB base64 line
# took minutes). A match can only start where such a run starts; the scan says so with a
# lookbehind (the grammar is unchanged). tests/test_hostile_input.py times every anchor.
RUN_HEADS: dict[str, str] = {
    "EXC_NAME": r"[\w.]",
    "USAGE_HEAD": r"[\w.\-]",
    "NO_VLLM_IMPL": r"[\w.]",
    "NOT_DIVISIBLE_BY": r"\d",
    "LOADER_HEAD": r"[\w.+\-/]",
}


# Literal words that every match of a true regex anchor contains (the others are derived).
REGEX_HINTS: dict[str, tuple[str, ...]] = {
    "OOM_HEAD": ("out of memory.",),
    "DEVICE_ERROR_OOM": ("error: out of memory",),
    "EXC_NAME": ("Error", "Exception", "Interrupt", "Exit", "Fault", "Failure", "Timeout", "Cancelled"),
    "BLOCKS_HEAD": (" blocks:",),
    "FRAME_FILE": ('File "',),
    "V0_WORKER_DIED": ("died, exit code:",),
    "ERRNO_ADDR": ("[Errno 98]", "[Errno 48]"),
    "HTTP_AUTH": ("401", "403"),
    "NCCL_HEAD": ("NCCL error",),
    "NCCL_CODE": ("nccl",),
    "KILLED_LINE": ("Killed",),
    "USAGE_HEAD": (": error: ",),
    "NO_VLLM_IMPL": ("has no vLLM implementation", "Cannot find model module"),
    "EXIT_STATUS": ("exited with code 13", "Exit Code: 13", "OOMKilled"),
    "CRASH": ("Segmentation fault", "Illegal instruction", "Floating point exception", "Aborted",
              "Fatal Python error: ", "terminate called after throwing"),
    "EXIT_CODE": ("exited with code ", "Exit Code: ", "Exited ("),
    "SUPERVISOR_FAILED": ("Back-off restarting failed container", "CrashLoopBackOff", "Failed with result '"),
    "NOT_DIVISIBLE_BY": (" is not divisible by ",),
    "DTYPE_FOR_QUANT": (" is not supported for quantization method",),
    "QUOTED_TICK": ("`",),
    "DIST_INIT": ("DistNetworkError", "DistStoreError", "waiting for clients", "The client socket has timed out after"),
    "LOGO_VERSION": ("█",),  # the logo pads with several spaces before "version"
    "RPC_CALL": ("_run_workers(", "collective_rpc(", "execute_method(", "run_method("),
    "PHASE_CALL": tuple(f"{name}(" for name in PHASE_CALLS),
    "HUB_GATED": ("Cannot access gated repo", "You are trying to access a gated repo", "GatedRepoError",
                  "is restricted", "Invalid credentials in Authorization header", " is gated"),  # an OOM clause that can open a line only inside a wrapped OOM text
}


REGEX_HINTS.update(LAYER_REGEX_HINTS)


@lru_cache(maxsize=1)
def prefilter_words() -> tuple[str, ...]:
    """Literal substrings, one of which every anchor match contains: the cheap first test."""
    lark = grammar()
    terminals = {t.name: t for t in lark.terminals}
    words: set[str] = set()
    for firsts in _first_terminals(lark).values():
        for name in firsts:
            words.update(_literals(name, terminals[name].pattern))
    return tuple(sorted(words))


def _literals(name: str, pattern) -> tuple[str, ...]:
    if name in REGEX_HINTS:
        return REGEX_HINTS[name]
    if pattern.type == "str":
        return (pattern.value,)
    body = pattern.value
    if body.startswith("(?:") and body.endswith(")"):
        body = body[3:-1]
    parts = body.split("|")
    if any(re.search(r"(?<!\\)[\\[\](){}*+?^$]", re.sub(r"\\.", "", p)) for p in parts):
        raise ValueError(f"anchor terminal {name} needs an entry in REGEX_HINTS")
    return tuple(re.sub(r"\\(.)", r"\1", p) for p in parts)


# Anchor terminals that match only a whole number (`\b40[13]\b`): their words are skipped
# inside longer numbers (ports, PIDs), which would otherwise make most access lines candidates.
WHOLE_NUMBER_HINTS = frozenset({"HTTP_AUTH"})


@lru_cache(maxsize=1)
def number_words() -> tuple[str, ...]:
    """The prefilter words that count only as whole numbers (see WHOLE_NUMBER_HINTS)."""
    out = {w for name in WHOLE_NUMBER_HINTS for w in REGEX_HINTS.get(name, ()) if w.isdigit()}
    return tuple(sorted(w for w in out if w in prefilter_words()))


def prefilter(raw: str) -> bool:
    """Can this physical line hold an event? (A superset test; the grammar decides.)"""
    from .scan import matcher

    return matcher().classify(raw)[0]


# Where a regex anchor's match can begin, relative to a hint word it holds: a class of the
# characters the match may hold before the hint ("" = the match begins with the hint). The
# anchor search tries the combined pattern only at such positions, never at every character
# of a line (that is slow: some anchors backtrack). A hint terminal missing here is tried
# at every position before its hint: correct, only slow.
HINT_LOOKBACK: dict[str, str] = {
    "OOM_HEAD": "[A-Z ]", "DEVICE_ERROR_OOM": "[A-Z ]", "EXC_NAME": r"[\w.]", "BLOCKS_HEAD": "[#A-Za-z ]",
    "FRAME_FILE": "", "V0_WORKER_DIED": r"[\w\- ]", "ERRNO_ADDR": "", "HTTP_AUTH": "", "NCCL_HEAD": "",
    "NCCL_CODE": "", "KILLED_LINE": "", "USAGE_HEAD": r"[\w.\- ]", "NO_VLLM_IMPL": r"[\w. ]",
    "EXIT_STATUS": "[A-Za-z: ]", "NOT_DIVISIBLE_BY": r"\d", "DTYPE_FOR_QUANT": r"[\w.]", "RPC_CALL": "", "PHASE_CALL": r"[\w.\[\] =]",
    "DIST_INIT": "", "QUOTED_TICK": "", "HUB_GATED": ".", "LOGO_VERSION": "", "CRASH": "", "EXIT_CODE": "", "SUPERVISOR_FAILED": "",
}
HINT_LOOKBACK.update(LAYER_HINT_LOOKBACK)


@lru_cache(maxsize=1)
def _word_groups() -> dict[str, tuple[tuple[int, re.Pattern[str] | None], ...]]:
    """Each prefilter word -> the anchor groups it can open (their search order), each with the
    characters the group's match may hold before the word (None: it starts at the word)."""
    lark = grammar()
    terminals = {t.name: t for t in lark.terminals}
    first = _first_terminals(lark)
    out: dict[str, dict[int, set[str]]] = {}
    for order, (_, rule, _) in enumerate(anchor_groups()[0]):
        for name in first[rule]:
            back = HINT_LOOKBACK.get(name, ".") if name in REGEX_HINTS else ""
            for word in _literals(name, terminals[name].pattern):
                out.setdefault(word, {}).setdefault(order, set()).add(back)
    return {w: tuple((order, re.compile("|".join(sorted(c - {""})), re.S) if c - {""} else None)
                     for order, c in sorted(groups.items()))
            for w, groups in out.items()}


def _anchor_candidates(text: str) -> list[tuple[int, tuple[int, ...]]]:
    """Every position where an anchor match may begin (a superset), with the groups that may
    match there in search order: from the positions of the prefilter words in the text."""
    from .scan import matcher

    info = _word_groups()
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
    for p, orders in candidates[bisect_left(candidates, (pos,)):]:
        for order in orders:
            m = _group_pattern(order).match(text, p)
            if m:
                return m
    return None


@lru_cache(maxsize=None)
def _group_pattern(order: int) -> re.Pattern[str]:
    return re.compile(anchor_groups()[0][order][2])


def _first_terminals(lark: Lark) -> dict[str, set[str]]:
    """FIRST sets of the start rules (terminal names), computed from lark's rule table."""
    by_origin: dict[str, list[list[str]]] = {}
    for rule in lark.rules:
        by_origin.setdefault(rule.origin.name, []).append([s.name for s in rule.expansion])
    memo: dict[str, set[str]] = {}

    def first(sym: str, seen: frozenset[str]) -> set[str]:
        if sym not in by_origin:
            return {sym}
        if sym in memo:
            return memo[sym]
        out: set[str] = set()
        for expansion in by_origin[sym]:
            for s in expansion:
                if s in seen:
                    break
                out |= first(s, seen | {sym})
                if not _nullable(s, by_origin):
                    break
        memo[sym] = out
        return out

    return {r: first(r, frozenset()) for r in START_RULES}


def _nullable(sym: str, by_origin: dict[str, list[list[str]]]) -> bool:
    return sym in by_origin and any(not exp for exp in by_origin[sym])


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
        where = {"line": line.no, "origin": line.origin, "pid": line.pid}
        return [e.model_copy(update=where) for e in seen[0]], seen[1]
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


def parse_lines(lines: Iterable[Line]) -> Iterator[ev.Event]:
    for line in lines:
        yield from parse_line(line)


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
    for r in lark.rules:
        if r.origin.name in START_RULES:
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
        out[rule] = (terminals[head].pattern.to_regexp(), head, next(iter(aliases)) or rule,
                     ("TAIL",) in tails, () in tails)
    return out


@lru_cache(maxsize=None)
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
    rest = text[m.end():].lstrip(" ")
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


EVENT_TYPES: dict[str, type[ev.Event]] = {
    cls.model_fields["kind"].default: cls
    for module in (ev, events_layers)
    for cls in vars(module).values()
    if isinstance(cls, type) and issubclass(cls, ev.Event) and "kind" in cls.model_fields
}


