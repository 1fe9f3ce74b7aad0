"""The grammar's search vocabulary: the literal words every anchor match holds (the prefilter),
where a match may begin around them, and the process's `Matcher` built from those words.

Kept apart from `parse.py` so the chunk scan can be handed a matcher without importing the
parser, and apart from `matcher.py`, which knows no grammar."""

from __future__ import annotations

import re
import threading
from functools import cache, lru_cache

from triage.ingest.matcher import Matcher
from triage.parse.grammar import PHASE_CALLS, anchor_groups, grammar, start_firsts
from triage.parse.layer_hints import LAYER_HINT_LOOKBACK, LAYER_REGEX_HINTS
from triage.patterns import LazyPattern

REGEX_HINTS: dict[str, tuple[str, ...]] = {
    "OOM_HEAD": ("out of memory.",),
    "DEVICE_ERROR_OOM": ("error: out of memory",),
    "EXC_NAME": (
        "Error",
        "Exception",
        "Interrupt",
        "Exit",
        "Fault",
        "Failure",
        "Timeout",
        "Cancelled",
        "gaierror",
        "herror",
    ),
    "BLOCKS_HEAD": (" blocks:",),
    "FRAME_FILE": ('File "', "File &quot;", "File \u201c"),  # and from a web page's source or a chat's curly quotes
    "V0_WORKER_DIED": ("died, exit code:",),
    "ERRNO_ADDR": ("[Errno 98]", "[Errno 48]"),
    "HTTP_AUTH": ("401", "403"),
    "NCCL_HEAD": ("NCCL error",),
    "NCCL_CODE": (
        "nccl",
        "unhandled system error (run",
        "unhandled cuda error (run",
        "internal error - please report",
        "remote process exited or there was",
    ),
    "KILLED_LINE": ("Killed", "Bus error"),
    "UNDEFINED_SYMBOL": ("undefined symbol: ",),
    "SIGNAL_EXIT": (
        "exitcode=-SIG",
        "failed (exitcode: -",
        ") received by PID",
        "is killed by signal: ",
        "trap invalid opcode",
    ),
    "SHELL_JOB": (" Killed", " Bus error"),
    "USAGE_HEAD": (": error: ",),
    "NO_VLLM_IMPL": ("has no vLLM implementation", "Cannot find model module"),
    "EXIT_STATUS": ("exited with code 13", "Exit Code: 13", "OOMKilled"),
    "CRASH": (
        "Segmentation fault",
        "Illegal instruction",
        "Floating point exception",
        "Aborted",
        "Fatal Python error: ",
        "terminate called after throwing",
    ),
    "EXIT_CODE": ("exited with code ", "Exit Code: ", "Exited (", "Exited with exit code "),
    "SLURM_OOM": (" oom_kill event", ": Out Of Memory"),
    "SUPERVISOR_FAILED": ("Back-off restarting failed container", "CrashLoopBackOff", "Failed with result '"),
    "NOT_DIVISIBLE_BY": (" is not divisible by ",),
    "DTYPE_FOR_QUANT": (" is not supported for quantization method",),
    "QUOTED_TICK": ("`",),
    "DIST_INIT": ("DistNetworkError", "DistStoreError", "waiting for clients", "The client socket has timed out after"),
    "LOGO_VERSION": ("█",),  # the logo pads with several spaces before "version"
    "RPC_CALL": ("_run_workers(", "collective_rpc(", "execute_method(", "run_method("),
    "PHASE_CALL": tuple(f"{name}(" for name in PHASE_CALLS),
    "HUB_GATED": (
        "Cannot access gated repo",
        "You are trying to access a gated repo",
        "GatedRepoError",
        "is restricted",
        "Invalid credentials in Authorization header",
        " is gated",
    ),  # an OOM clause that can open a line only inside a wrapped OOM text
}


REGEX_HINTS.update(LAYER_REGEX_HINTS)


@lru_cache(maxsize=1)
def _grammar_facts() -> tuple[dict, dict[str, set[str]]]:
    """The grammar's terminals by name and its start rules' FIRST terminals (read once)."""
    lark = grammar()
    return {t.name: t for t in lark.terminals}, start_firsts()


@lru_cache(maxsize=1)
def prefilter_words() -> tuple[str, ...]:
    """Literal substrings, one of which every anchor match contains: the cheap first test."""
    terminals, first = _grammar_facts()
    words: set[str] = set()
    for firsts in first.values():
        for name in firsts:
            words.update(_literals(name, terminals[name].pattern))
    return tuple(sorted(words))


def _literals(name: str, pattern) -> tuple[str, ...]:
    if name in REGEX_HINTS:
        return REGEX_HINTS[name]
    if pattern.type == "str":
        return (pattern.value,)
    return _alternatives(name, pattern.value)


@cache
def _alternatives(name: str, body: str) -> tuple[str, ...]:
    """The literal words of a regex terminal that is a plain alternation (read once per process:
    both the prefilter words and the word groups ask)."""
    if body.startswith("(?:") and body.endswith(")"):
        body = body[3:-1]
    parts = body.split("|")
    if any(re.search(r"(?<!\\)[\\[\](){}*+?^$]", re.sub(r"\\.", "", p)) for p in parts):
        raise ValueError(f"anchor terminal {name} needs an entry in REGEX_HINTS")
    return tuple(re.sub(r"\\(.)", r"\1", p) if "\\" in p else p for p in parts)  # most hold no escape


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
    return matcher().classify(raw)[0]


# Where a regex anchor's match can begin, relative to a hint word it holds: a class of the
# characters the match may hold before the hint ("" = the match begins with the hint). The
# anchor search tries the combined pattern only at such positions, never at every character
# of a line (that is slow: some anchors backtrack). A hint terminal missing here is tried
# at every position before its hint: correct, only slow.
HINT_LOOKBACK: dict[str, str] = {
    "OOM_HEAD": "[A-Z ]",
    "DEVICE_ERROR_OOM": "[A-Z ]",
    "EXC_NAME": r"[\w.]",
    "BLOCKS_HEAD": "[#A-Za-z ]",
    "FRAME_FILE": "",
    "V0_WORKER_DIED": r"[\w\- ]",
    "ERRNO_ADDR": "",
    "HTTP_AUTH": "",
    "NCCL_HEAD": "",
    "NCCL_CODE": "",
    "KILLED_LINE": "",
    "UNDEFINED_SYMBOL": "",
    "SHELL_JOB": r"[\w: ]",
    "USAGE_HEAD": r"[\w.\- ]",
    "NO_VLLM_IMPL": r"[\w. ]",
    "EXIT_STATUS": "[A-Za-z: ]",
    "NOT_DIVISIBLE_BY": r"\d",
    "DTYPE_FOR_QUANT": r"[\w.]",
    "RPC_CALL": "",
    "PHASE_CALL": r"[\w.\[\] =]",
    "DIST_INIT": "",
    "QUOTED_TICK": "",
    "HUB_GATED": ".",
    "LOGO_VERSION": "",
    "CRASH": "",
    "SIGNAL_EXIT": r"[\w ()]",
    "EXIT_CODE": "",
    "SLURM_OOM": r"[\w ]",
    "SUPERVISOR_FAILED": "",
}
HINT_LOOKBACK.update(LAYER_HINT_LOOKBACK)


@lru_cache(maxsize=1)
def word_groups() -> dict[str, tuple[tuple[int, LazyPattern | None], ...]]:
    """Each prefilter word -> the anchor groups it can open (their search order), each with the
    characters the group's match may hold before the word (None: it starts at the word)."""
    terminals, first = _grammar_facts()
    out: dict[str, dict[int, set[str]]] = {}
    for order, (_, rule, _) in enumerate(anchor_groups()[0]):
        for name in first[rule]:
            back = HINT_LOOKBACK.get(name, ".") if name in REGEX_HINTS else ""
            for word in _literals(name, terminals[name].pattern):
                out.setdefault(word, {}).setdefault(order, set()).add(back)
    return {
        w: tuple(
            (order, _lookback("|".join(sorted(c - {""}))) if c - {""} else None) for order, c in sorted(groups.items())
        )
        for w, groups in out.items()
    }


@cache
def _lookback(source: str) -> LazyPattern:
    """One pattern object per class (the anchor search keys the walks it has done by it),
    compiled when a walk first needs it: most lines hold few of the words."""
    return LazyPattern(source, re.S)


_LOCK = threading.Lock()


def matcher(backend: str | None = None) -> Matcher:
    """The process's matcher (built once; a live watch parses from two threads)."""
    with _LOCK:
        return _matcher(backend)


@lru_cache(maxsize=4)
def _matcher(backend: str | None) -> Matcher:
    from triage.parse.sysinfo import WORDS

    return Matcher((*prefilter_words(), *LEVEL_WORDS), WORDS, backend, number_words())


# A logged ERROR/CRITICAL line states a failure even in words the grammar does not know
# (parse/stream.py: _error_line): such lines are handed on too. No grammar anchor starts with them,
# so the parser spends nothing on them.
LEVEL_WORDS = ("ERROR ", "CRITICAL ")
