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

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import LarkError

from . import events as ev
from .lines import Line
from .settings import parse_settings
from .units import parse_size

# Start rules, one per message family; the Transformer turns each into events.
START_RULES = (
    "oom", "cuda_error_oom", "cpu_alloc", "budget", "profile_split", "profile_results",
    "profile_time", "kv_memory", "kv_tokens", "max_concurrency", "blocks", "weights_v0", "kv_needed",
    "weights_v1", "startup_free", "profiling_error", "kv_error", "no_cache", "graph_start",
    "graph_done", "sampler_oom", "load_oom", "encoder_budget", "profile_start",
    "weights_start", "swap", "ready", "banner", "server_version", "logo_version", "arg_dump",
    "traceback", "frame", "chain", "exception", "wrapper", "address_in_use", "hub_http", "hub_gated",
    "hub_missing", "architecture", "not_divisible", "not_enough_gpus", "bf16_capability", "cc_below",
    "quant_capability", "driver", "nccl", "nccl_code", "nccl_watchdog", "shm", "host_memory", "killed",
    "usage_error", "arch_no_impl", "world_size", "exit_status", "rpc_call", "failed_procs",
    "arch_unknown_model_type", "divisibility", "dtype_for_quant", "dist_init", "systemd_restart", "systemd_exit",
    "systemd_oom",
)
# Rules that only make sense at the start of a message (their anchors are generic words).
AT_START_ONLY = frozenset({"frame", "chain", "exception", "killed"})
_WS = re.compile(r"\s+")
_RPC = re.compile(r"(?:_run_workers|collective_rpc|execute_method|run_method)\(")
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
    return Lark.open_from_package(
        "triage", "vllm_log.lark", parser="lalr", start=list(START_RULES), cache=_cache_path()
    )


def _cache_path() -> str | bool:
    import os

    from . import __version__
    from .cache import cache_dir

    base = cache_dir()  # lark's cache is a pickle: only in a folder that is ours alone
    return os.path.join(base, f"vllm_log-{__version__}.lark.cache") if base else False


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
    "NOT_DIVISIBLE_BY": (" is not divisible by ",),
    "DTYPE_FOR_QUANT": (" is not supported for quantization method",),
    "QUOTED_TICK": ("`",),
    "DIST_INIT": ("DistNetworkError", "DistStoreError", "waiting for clients", "The client socket has timed out after"),
    "LOGO_VERSION": ("█",),  # the logo pads with several spaces before "version"
    "RPC_CALL": ("_run_workers(", "collective_rpc(", "execute_method(", "run_method("),
    "HUB_GATED": ("Cannot access gated repo", "You are trying to access a gated repo", "GatedRepoError",
                  "is restricted", "Invalid credentials in Authorization header", " is gated"),  # an OOM clause that can open a line only inside a wrapped OOM text
}


@lru_cache(maxsize=1)
def prefilter_words() -> tuple[str, ...]:
    """Literal substrings, one of which every anchor match contains: the cheap first test."""
    lark = grammar()
    terminals = {t.name: t for t in lark.terminals}
    words: set[str] = set()
    for rule, firsts in _first_terminals(lark).items():
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
    "EXIT_STATUS": "[A-Za-z: ]", "NOT_DIVISIBLE_BY": r"\d", "DTYPE_FOR_QUANT": r"[\w.]", "RPC_CALL": "",
    "DIST_INIT": "", "QUOTED_TICK": "", "HUB_GATED": ".", "LOGO_VERSION": "",
}


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


def parse_line_detail(line: Line) -> tuple[list[ev.Event], bool]:
    """Events, and whether some message ran into the end of the line (a wrap or a cut)."""
    if _SOURCE_CODE.match(line.text) and not _RPC.search(line.text):
        return [], False  # a traceback quoting source (`raise ValueError("No available memory ...`) states nothing
    text = normalise(line.text)
    if not text:
        return [], False
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
            made = _TRANSFORMER.transform(tree)
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


def _quick_tree(rule: str, text: str) -> Tree | None:
    """The tree lark would build for a `HEAD TAIL?` rule, or None (then lark parses)."""
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
    for cls in vars(ev).values()
    if isinstance(cls, type) and issubclass(cls, ev.Event) and "kind" in cls.model_fields
}


def _num(tok: Token | str) -> float:
    return float(str(tok))


def _int(tok: Token | str) -> int:
    return int(str(tok).replace(",", ""))


@v_args(inline=True)
class ToEvents(Transformer):
    """Method names are the grammar's rule names and aliases; each returns event fields."""

    # --- OOM ---
    def oom(self, head, requested, rest, tail=None):
        fields = {"kind": "torch_oom", "device": str(head).split()[0], "requested": parse_size(requested)}
        fields.update(rest)
        return fields

    def oom_new(self, *clauses):
        out: dict = {"processes": []}
        for key, value in clauses:
            if key == "process":
                out["processes"].append(value)
            else:
                out.update(value)
        out["processes"] = tuple(out["processes"])
        return out

    def oom_capacity(self, *args):
        sizes = [a for a in args if a.type == "SIZE"]
        index = [a for a in args if a.type == "INT"]
        return "capacity", {
            "gpu_index": _int(index[0]) if index else None,
            "total": parse_size(sizes[0]),
            "free": parse_size(sizes[1]),
        }

    def oom_process(self, pid, size):
        return "process", ev.OomProcess(pid=_int(pid), bytes=parse_size(size))

    def oom_this_process(self, size):
        return "this", {"this_process": parse_size(size)}

    def oom_allowed(self, size):
        return "allowed", {"allowed": parse_size(size)}

    def oom_allocation(self, allocated, *rest):
        private = rest[0] if len(rest) == 2 else None
        return "allocation", {
            "allocated": parse_size(allocated),
            "private_pools": private,
            "reserved_unallocated": parse_size(rest[-1]),
        }

    def oom_private(self, size):
        return parse_size(size)

    def oom_old(self, *clauses):
        out: dict = {}
        for c in clauses:
            out.update(c)
        return out

    def old_gpu(self, index):
        return {"gpu_index": _int(index)}

    def old_total(self, size, _cap):
        return {"total": parse_size(size)}

    def old_allocated(self, size):
        return {"allocated": parse_size(size)}

    def old_free(self, size):
        return {"free": parse_size(size)}

    def old_allowed(self, size):
        return {"allowed": parse_size(size)}

    def old_reserved(self, size):
        return {"reserved_total": parse_size(size)}

    def cuda_error_oom(self, head, tail=None):
        return {"kind": "cuda_error_oom", "device": str(head).split()[0]}

    def cpu_alloc(self, _verb, n, tail=None):
        return {"kind": "cpu_alloc_failed", "requested": _int(n)}

    # --- V0 profiling ---
    def budget(self, total, util, budget, tail=None):
        return {"kind": "memory_budget", "total": parse_size(total), "utilization": _num(util),
                "budget": parse_size(budget)}

    def profile_split(self, *clauses):
        out = {"kind": "memory_profile"}
        for c in clauses:
            if isinstance(c, tuple):
                out[c[0]] = c[1]
        return out

    def split_weights(self, s):
        return "weights", parse_size(s)

    def split_non_torch(self, s):
        return "non_torch", parse_size(s)

    def split_activation(self, s):
        return "activation_peak", parse_size(s)

    def split_kv(self, s):
        return "kv_cache", parse_size(s)

    def profile_results(self, *pairs):
        got = dict(p for p in pairs if isinstance(p, tuple))
        total, util = got.get("total_gpu_memory"), got.get("gpu_memory_utilization")
        out: list[dict] = []
        if isinstance(total, int) and util is not None:
            out.append({"kind": "memory_budget", "total": total, "utilization": float(util),
                        "budget": int(total * float(util))})
        out.append({"kind": "memory_profile", "kv_cache": got.get("kv_cache_size"),
                    "non_torch": got.get("non_torch_memory")})
        return out

    def result_pair(self, name, value):
        return str(name), parse_size(value) if value.type == "SIZE" else _num(value)

    # --- V1 profiling ---
    def profile_time(self, seconds, *clauses):
        out = {"kind": "memory_profile", "seconds": _num(seconds)}
        out.update(c for c in clauses if isinstance(c, tuple))
        return out

    def v1_non_kv(self, s):
        return "non_kv_total", parse_size(s)

    def v1_activation(self, s):
        return "activation_peak", parse_size(s)

    def v1_non_torch(self, s):
        return "non_torch", parse_size(s)

    def v1_consumed(self, s):
        return "non_torch", parse_size(s)

    def v1_weights(self, s):
        return "weights", parse_size(s)

    def kv_memory(self, size, tail=None):
        return {"kind": "kv_cache_memory", "bytes": parse_size(size)}

    def kv_tokens(self, n, tail=None):
        return {"kind": "kv_cache_tokens", "tokens": _int(n)}

    def concurrency(self, n, factor):
        return {"kind": "max_concurrency", "tokens_per_request": _int(n), "factor": float(str(factor)[:-1])}

    def max_concurrency(self, conc, tail=None):
        return conc

    def blocks(self, _head, gpu, *rest):
        cpu = _int(rest[1]) if len(rest) >= 2 and rest[1].type == "INT" else None
        return {"kind": "cache_blocks", "gpu_blocks": _int(gpu), "cpu_blocks": cpu}

    def weights_v0(self, size, tail=None):
        return {"kind": "weights_loaded", "bytes": parse_size(size)}

    def weights_v1(self, size, *rest):
        secs = [r for r in rest if isinstance(r, Token) and r.type == "NUMBER"]
        return {"kind": "weights_loaded", "bytes": parse_size(size), "seconds": _num(secs[0]) if secs else None}

    # --- startup free memory ---
    def startup_free(self, *args):
        device = str(args[0]) if args[0].type == "DEVICE_NAME" else None
        rest = args[1:] if device else args
        free_gib, total, tail = rest[0], rest[1], rest[2]
        fields = {"kind": "startup_free_memory", "free": parse_size(f"{free_gib} GiB"),
                  "total": parse_size(total), "device": device}
        fields.update(tail)
        return fields

    def free_error(self, util, requested):
        return {"utilization": _num(util), "requested": parse_size(requested), "is_error": True}

    def free_info(self, util, requested):
        return {"utilization": _num(util), "requested": parse_size(requested), "is_error": False}

    def profiling_error(self, figures=None, tail=None):
        fields = {"kind": "profiling_mismatch"}
        if isinstance(figures, dict):
            fields.update(figures)
        return fields

    def profiling_figures(self, measure, a, _cur, _m2, b):
        return {"measure": str(measure), "initial": a, "current": b}

    def amount(self, tok):
        return parse_size(tok) if tok.type == "SIZE" else _int(tok)

    # --- KV errors ---
    def kv_error(self, n, m, tail=None):
        return {"kind": "kv_too_small", "max_seq_len": _int(n), "kv_tokens": _int(m)}

    def kv_needed(self, _word, n, *rest):
        fields = {"kind": "kv_needed", "max_seq_len": _int(n)}
        figures = next((r for r in rest if isinstance(r, dict)), None)
        if figures:
            fields.update(figures)
        return fields

    def kv_needed_figures(self, needed, available, est=None):
        return {"needed": parse_size(needed), "available": parse_size(available),
                "estimated_max_len": est if isinstance(est, int) else None}

    def kv_estimate(self, n=None):
        return _int(n) if n is not None else None

    def no_cache(self, tail=None):
        return {"kind": "no_cache_memory"}

    # --- graphs, warm-up, loading ---
    def graph_start(self, head, tail=None):
        return {"kind": "phase", "phase": "cuda_graph_capture", "what": str(head)}

    def graph_done(self, secs, *rest):
        size = next((r for r in rest if r.type == "SIZE"), None)
        return {"kind": "graph_capture_done", "seconds": _num(secs), "bytes": parse_size(size) if size else None}

    def sampler_oom(self, what, n, tail=None):
        return {"kind": "sampler_warmup_oom", "requests": _int(n), "what": str(what).split()[0]}

    def load_oom(self, tail=None):
        return {"kind": "load_model_oom"}

    def encoder_budget(self, tokens, items, modality, tail=None):
        return [{"kind": "encoder_cache_budget", "tokens": _int(tokens), "items": _int(items),
                 "modality": str(modality)},
                {"kind": "phase", "phase": "profiling", "what": "multimodal encoder profiling"}]

    def profile_start(self, head, tail=None):
        return {"kind": "phase", "phase": "profiling", "what": str(head)}

    def weights_start(self, head, tail=None):
        return {"kind": "phase", "phase": "loading_weights", "what": str(head)}

    def swap(self, head, swap, total, tail=None):
        return {"kind": "swap_space", "swap": parse_size(swap), "cpu_total": parse_size(total),
                "is_error": str(head).startswith("Too")}

    def ready(self, head, tail=None):
        return {"kind": "ready", "what": str(head)}

    # --- version and config ---
    def banner(self, words, *rest):
        version = next((str(r)[2:-1] for r in rest if r.type == "VERSION_PAREN"), None)
        tail = next((str(r) for r in rest if r.type == "TAIL"), "")
        engine = "v1" if "V1" in words else "v0" if "V0" in words else None
        return {"kind": "engine_config", "version": version, "engine": engine, "settings": parse_settings(tail)}

    def server_version(self, _head, version, *rest):
        return {"kind": "engine_config", "source": "version", "version": str(version).lstrip("v")}

    def logo_version(self, version, tail=None):
        return {"kind": "engine_config", "source": "version", "version": str(version).lstrip("v")}

    def arg_dump(self, head, tail):
        return {"kind": "engine_config", "source": "args", "settings": parse_settings(str(tail))}

    # --- tracebacks and wrappers ---
    def traceback(self, tail=None):
        return {"kind": "traceback_start"}

    def frame(self, path, lineno, *rest):
        func = next((str(r) for r in rest if r.type == "FUNC"), "")
        return {"kind": "frame", "file": str(path)[6:-1], "lineno": _int(lineno), "func": func}

    def rpc_call(self, tok, tail=None):
        method = re.search(r"[\"'](\w+)[\"']", str(tok))
        return {"kind": "frame", "file": "<rpc>", "lineno": None, "func": method.group(1) if method else ""}

    def chain(self, text):
        return {"kind": "chain", "cause": "direct cause" in text}

    def exception(self, name, tail=None):
        return {"kind": "exception", "type": str(name), "message": str(tail or "").strip()}

    def wrapper_plain(self, head, tail=None):
        return {"kind": "process_died", "wrapper": str(head)}

    def worker_died(self, name, *rest):
        code = next((int(r) for r in rest if r.type == "SIGNED"), None)
        return {"kind": "process_died", "name": str(name), "exit_code": code, "wrapper": "died unexpectedly"}

    def worker_died_v0(self, head, code, tail=None):
        name = " ".join(str(head).split()[1:4])
        return {"kind": "process_died", "name": name, "exit_code": int(code), "wrapper": "worker died"}

    def worker_exception(self, name, method, tail=None):
        return {"kind": "process_died", "name": str(name), "method": str(method),
                "wrapper": "exception in worker"}

    def failed_procs(self, procs, tail=None):
        codes = [int(c) for c in re.findall(r":\s*(-?\d+)", str(procs))]
        return {"kind": "process_died", "name": str(procs), "exit_code": codes[0] if codes else None,
                "wrapper": "Failed core proc(s)"}

    # --- other startup failures ---
    def address_in_use(self, _errno, rest):
        return rest

    def bind_uvicorn(self, host, port, tail):
        return {"kind": "address_in_use", "host": str(host)[1:-1], "port": _int(port)}

    def bind_plain(self, tail):
        if "in use" not in str(tail).lower():
            raise ValueError("not an address-in-use error")
        port = re.search(r"port[ =:]+(\d+)|:(\d{2,5})\b", str(tail))
        return {"kind": "address_in_use", "port": _int(port.group(1) or port.group(2)) if port else None}

    def hub_http(self, status, _client, tail=None):
        text = str(tail or "")
        if "huggingface" not in text and "hf.co" not in text and "http" in text:
            raise ValueError("an HTTP error from somewhere else")
        return {"kind": "hub_auth_error", "status": int(str(status)), "repo": _hf_repo(text)}

    def hub_gated(self, head, tail=None):
        text = str(head)
        if text == "Invalid credentials in Authorization header":
            return {"kind": "hub_auth_error", "status": 401, "repo": _hf_repo(str(tail or ""))}
        return {"kind": "hub_auth_error", "gated": True, "repo": _hf_repo(text + " " + str(tail or ""))}

    def hub_missing(self, head, tail=None):
        rest = str(tail or "")
        quoted = re.search(r"'([\w.\-]+/[\w.\-]+)'", rest)
        return {"kind": "repo_not_found", "repo": _hf_repo(rest) or (quoted.group(1) if quoted else None)}

    def architecture(self, names, verb, tail=None):
        archs = tuple(re.findall(r"'([^']+)'", str(names)))
        rest = str(tail or "")
        listed = "upported architectures" in rest and any(f"'{a}'" in rest for a in archs)
        return {"kind": "architecture_unsupported", "architectures": archs, "listed": listed,
                "inspect_failed": "inspected" in str(verb)}

    def arch_no_impl(self, head, tail=None):
        name = re.match(r"(?:Cannot find model module\. )?'?([\w.]+)", str(head))
        return {"kind": "architecture_unsupported", "architectures": (name.group(1),) if name else ()}

    def bind_zmq(self, head, tail=None):
        port = re.search(r":(\d{2,5})\b", str(tail or ""))
        return {"kind": "address_in_use", "port": _int(port.group(1)) if port else None, "host": "zmq"}

    def arch_unknown_model_type(self, model_type, tail=None):
        return {"kind": "architecture_unsupported", "architectures": (str(model_type).strip("`"),)}

    def divisibility(self, head, tail=None):
        a, b = re.findall(r"\d+", str(head))[:2]
        return {"kind": "not_divisible", "what": "units (heads, layers or experts)", "total": _int(a),
                "size": _int(b), "parallel": "tensor"}

    def dtype_for_quant(self, head, method, tail=None):
        dtype = str(head).split()[0][len("torch."):]
        return {"kind": "capability_too_low", "feature": f"{dtype} with quantization {str(method).rstrip('.')}",
                "required": None}

    def dist_init(self, head, tail=None):
        return {"kind": "nccl_error", "problem": f"distributed init failed ({head})"}

    def systemd_restart(self, count, *rest):
        return {"kind": "restart_count", "count": _int(count)}

    def systemd_exit(self, code, status, tail=None):
        how, value = str(code).rstrip(","), str(status)
        if value.startswith("9/") or value == "9" and how == "killed":
            return {"kind": "killed", "signal": "SIGKILL"}
        if value.startswith("7/") and how == "killed":
            return {"kind": "killed", "signal": "SIGBUS"}
        number = int(value.split("/")[0])
        return {"kind": "process_died", "name": "main process (systemd)",
                "exit_code": -number if how == "killed" else number, "wrapper": f"systemd: {how}"}

    def systemd_oom(self, tail=None):
        return {"kind": "host_memory_problem", "problem": "systemd: the kernel OOM killer killed a process of the unit"}

    def world_size(self, world, gpus, tail=None):
        return {"kind": "not_enough_gpus", "required": _int(world), "available": _int(gpus),
                "detail": f"world size {world} is larger than the {gpus} GPUs available in this node"}

    def exit_status(self, tok):
        text = str(tok)
        return {"kind": "killed", "signal": "SIGBUS" if "135" in text else "SIGKILL"}

    def not_divisible(self, what, total, by, size, tail=None):
        parallel = str(by).split()[0].lower()
        return {"kind": "not_divisible", "what": str(what), "total": _int(total), "size": _int(size),
                "parallel": parallel}

    def not_enough_gpus(self, head, tail=None):
        return {"kind": "not_enough_gpus", "detail": str(head)}

    def bf16_capability(self, required, *rest):
        has = next((r for r in rest if isinstance(r, tuple)), (None, None))
        return {"kind": "capability_too_low", "feature": "bfloat16", "required": str(required),
                "gpu": has[0], "capability": has[1]}

    def gpu_has(self, name, cap):
        return (str(name).strip(), str(cap))

    def cc_below(self, cap, tail=None):
        return {"kind": "capability_too_low", "feature": "this vLLM build", "required": str(cap)}

    def quant_capability(self, method, *rest):
        caps = [str(r) for r in rest if isinstance(r, Token) and r.type == "INT"]
        return {"kind": "capability_too_low", "feature": f"quantization {method}",
                "required": _cap(caps[0]) if caps else None, "capability": _cap(caps[1]) if len(caps) > 1 else None}

    def driver(self, head, tail=None):
        text = str(head)
        found = re.search(r"found version (\d+)", str(tail or ""))
        return {"kind": "driver_problem", "problem": _DRIVER_PROBLEMS.get(text, text),
                "found": found.group(1) if found else None}

    def nccl(self, head, tail=None):
        return {"kind": "nccl_error", "problem": _nccl_problem(str(tail or ""))}

    def nccl_code(self, code, tail=None):
        return {"kind": "nccl_error", "problem": _NCCL_CODES.get(str(code), str(code))}

    def nccl_watchdog(self, work, tail=None):
        text = str(work)
        timeout = re.search(r"Timeout\(ms\)=(\d+)", text)
        seq = re.search(r"SeqNum=(\d+)", text)
        op = re.search(r"OpType=(\w+)", text)
        return {"kind": "nccl_error", "problem": "watchdog timeout", "timeout_ms": _int(timeout.group(1)) if timeout else None,
                "seq": _int(seq.group(1)) if seq else None, "op": op.group(1) if op else None}

    def shm(self, head, tail=None):
        text, rest = str(head), str(tail or "")
        if text == "No space left on device" and not re.search(r"/dev/shm|shm|torch_\d", rest + text):
            raise ValueError("disk full, not /dev/shm")
        path = re.search(r"(/dev/shm/\S+)", rest)
        size = re.search(r"\(size (\d+)\)|to (\d+) bytes|only (\d+) bytes", rest)
        return {"kind": "shm_problem", "problem": _SHM_PROBLEMS.get(text, text), "path": path.group(1) if path else None,
                "size": _int(next(g for g in size.groups() if g)) if size else None}

    def host_memory(self, head, tail=None):
        text, rest = str(head), str(tail or "")
        out = {"kind": "host_memory_problem", "problem": _HOST_PROBLEMS.get(text, text),
               "generic": text.startswith("A worker died")}
        m = re.search(r"was (\d+(?:\.\d+)?)GB / (\d+(?:\.\d+)?)GB \((\d+(?:\.\d+)?)\), which exceeds the memory "
                      r"usage threshold of (\d+(?:\.\d+)?)", rest)
        if m:
            out.update(used=parse_size(m.group(1) + "GB"), total=parse_size(m.group(2) + "GB"),
                       threshold=float(m.group(4)))
        return out

    def killed(self, _tok):
        return {"kind": "killed"}

    def usage_error(self, head, tail=None):
        return {"kind": "usage_error", "message": str(tail or "")[:300]}


_DRIVER_PROBLEMS = {
    "no kernel image is available for execution on the device": "no kernel image for this GPU",
    "device kernel image is invalid": "kernel image built for another GPU or toolkit",
    "CUDA driver version is insufficient for CUDA runtime version": "driver older than the CUDA runtime",
    "Found no NVIDIA driver on your system": "no NVIDIA driver",
    "The NVIDIA driver on your system is too old": "driver too old",
    "no CUDA-capable device is detected": "no GPU visible",
    "forward compatibility was attempted on non supported HW": "CUDA forward compatibility on unsupported hardware",
    "system has unsupported display driver / cuda driver combination": "driver and CUDA libraries mismatch",
    "_C.abi3.so: undefined symbol": "vLLM's compiled kernels do not match the installed torch/CUDA",
    "installed an obsolete version of vllm": "vLLM's compiled kernels do not match the installed torch/CUDA",
    "libcuda.so.1: cannot open shared object file": "no NVIDIA driver (libcuda.so.1 not found)",
    "No CUDA GPUs are available": "no GPU visible to this process (driver, container runtime or CUDA_VISIBLE_DEVICES)",
    "Torch not compiled with CUDA enabled": "a CPU-only build of torch is installed",
}
_NCCL_CODES = {"ncclSystemError": "unhandled system error", "ncclUnhandledCudaError": "unhandled cuda error",
               "ncclInternalError": "internal error", "ncclRemoteError": "remote process exited",
               "ncclInvalidUsage": "invalid usage", "ncclInvalidArgument": "invalid argument"}
_SHM_PROBLEMS = {"Error while creating shared memory segment": "cannot create an NCCL shared-memory segment",
                 "failed to extend /dev/shm": "cannot extend an NCCL shared-memory segment",
                 "No space left on device": "no space left on /dev/shm",
                 "unable to write to file </torch_": "PyTorch could not write a shared-memory file in /dev/shm",
                 "Fatal Python error: Bus error": "bus error",
                 "SIGBUS received": "bus error", "Bus error (core dumped)": "bus error",
                 "/dev/shm has only": "small /dev/shm"}
_HOST_PROBLEMS = {"A worker died or was killed while executing a task by an unexpected system error":
                  "a Ray worker died without a Python error",
                  "Task was killed due to the node running low on memory": "Ray killed a task: node low on memory",
                  "Memory on the node": "Ray memory monitor threshold exceeded",
                  "killed by SIGKILL by OOM killer": "killed by the OOM killer",
                  "OOM-killed": "container OOM-killed", "OOMKilled": "container OOM-killed",
                  "Out of memory: Killed process": "kernel OOM killer", "oom-kill": "kernel OOM killer"}


def _nccl_problem(text: str) -> str:
    for key in ("unhandled system error", "unhandled cuda error", "internal error", "remote process exited",
                "invalid usage", "invalid argument", "timeout"):
        if key in text:
            return key
    return text.split("(")[0].strip()[:80] or "NCCL error"


def _hf_repo(text: str) -> str | None:
    m = re.search(r"(?:huggingface\.co|hf\.co)/(?:api/models/)?([\w.\-]+/[\w.\-]+)", text)
    if m:
        return m.group(1)
    m = re.search(r"[Rr]epo (?:model )?([\w.\-]+/[\w.\-]+)", text)
    return m.group(1) if m else None


def _cap(digits: str) -> str:
    return f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 2 else digits


_TRANSFORMER = ToEvents()
