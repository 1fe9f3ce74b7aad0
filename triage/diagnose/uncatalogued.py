"""A failure's exception that the catalogue does not hold, read the way the catalogue's build
reads vLLM's source.

The catalogue holds the messages of the releases and the parts of vLLM its build read; a user
may run another release, or fail in a part it does not read. The cause each catalogued message
names was decided from its exception class, its wording and the place it is raised
(`parse/message_causes.py`); a log gives the same three for an exception it prints: the class
and message, and the file and function of the traceback's innermost frame. Read with the same
decision, an uncatalogued message names the cause a catalogued one worded or placed like it
would, or none: a programming error ("internal"), a message that says it carries on, a
request-time place, a wrapper that only says a step failed, or nothing that decides.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from triage.model import events as ev
from triage.parse.catalogue import CatalogueHit
from triage.timeline.signals import Signal

_PACKAGES = frozenset({"vllm", "torch", "transformers", "huggingface_hub", "safetensors"})
# The packages whose source the decision knows, as a frame's path names them (an installed copy
# under site-packages, or a source checkout): their path from the package's folder down.
_PLACE = re.compile(r"(?:^|[/\\])((?:vllm|torch|transformers|huggingface_hub|safetensors)[/\\][^\"]*?\.py)$")
# Classes the interpreter raises on its own (a call with the wrong arguments, a missing key or
# attribute): their words are Python's, not a message of the source the decision was made for,
# and a place says nothing of them (a plugin written for another API fails inside vLLM's loader).
_INTERPRETER = frozenset({"AttributeError", "IndexError", "NameError", "UnboundLocalError", "ZeroDivisionError"})
# vLLM raises TypeError and KeyError with messages of its own too ("X requires an SM90
# implementation", "Unexpected checkpoint tensor: ..."); the interpreter's are a key's repr alone
# or CPython's own wording of a call or an operation on the wrong type.
_PYTHON_WORDS = {
    "TypeError": re.compile(
        r"unexpected keyword argument|required (positional|keyword-only) argument|positional arguments? but|"
        r"takes (no|\d+|from \d+ to \d+) (positional )?arguments?|object is not (callable|subscriptable|iterable)|"
        r"unsupported operand type|has no attribute|must be (str|int|bytes|an? [\w.]+|real number)\b.*, not \w+|"
        r"can only concatenate|unhashable type|not supported between instances|cannot be interpreted as|"
        r"\bNoneType\b|got multiple values for|argument of type|object does not support"
    ),
    "KeyError": re.compile(r"^\s*(?:'[^']*'|\"[^\"]*\"|-?\d+|\(.*\))\s*$"),
}
# The import system's and the loader's own words: which package or version is at fault is read
# by the root exception's rules (timeline/root_exception.py), never by a catalogue decision.
_IMPORT_SYSTEM = re.compile(
    r"cannot import name|No module named|partially initiali[sz]ed module|DLL load failed|"
    r"cannot open shared object file|undefined symbol"
)
# Decisions that name no cause and mean the message is no user-facing start-up error: stop there.
_NOT_A_FAILURE = frozenset({"internal", "benign", "request-time"})
# A message with no frame at all (a pasted line) is taken as vLLM's own, from no file in particular ...
_NO_FRAME = ("vllm/", "")
# ... and one of the classes vLLM's checks raise as a check of its arguments: of the catalogue's
# ValueError / NotImplementedError / AssertionError messages two in three reject an argument
# (1193 of 1754: invalid_arguments, 15% no cause, 8% a parallel size, 2% files, 2% a dtype).
_CHECK_CLASSES = frozenset({"ValueError", "NotImplementedError"})
MIN_CHECK = 20  # characters of a message the prior reads at least ("Total numb" is a cut, not a check)
# How the decision named the cause, as the explanation says it ("its wording names this cause").
_HOW = {"wording": "wording", "place": "place in the source", "class": "exception class", "override": "wording"}


def uncatalogued_hit(fatal: Signal) -> CatalogueHit | None:
    """The first exception of the fatal chain (its root first) whose class, wording or place
    names a cause; None when one says it is no start-up failure, or none decides."""
    from triage.parse.catalogue import catalogue
    from triage.parse.message_causes import cause_of

    for exc, frame in _raised(fatal):
        if catalogue().holds(f"{exc.type}: {exc.message}"):
            return None  # a message the catalogue holds and gives no cause (a request's, a wrapper's)
        module, _, cls = exc.type.rpartition(".")
        if module and module.split(".", 1)[0] not in _PACKAGES:
            return None  # another library's own exception (`_pickle.UnpicklingError`): not the source read
        python = _PYTHON_WORDS.get(cls)
        if (
            cls in _INTERPRETER
            or (python is not None and python.search(exc.message))
            or _IMPORT_SYSTEM.search(exc.message)
        ):
            return None
        file, function = _place(frame)
        if frame is not None and not file:
            continue  # raised in another package (a plugin, a kernel library): its words, not vLLM's
        cause, how = cause_of(file, cls, exc.message, function)
        if frame is None and cls in _CHECK_CLASSES:
            cause, how = _as_a_check(cause, how, exc.message)
        if how in _NOT_A_FAILURE:
            return None
        if cause != "unknown_failure":
            where = f"raised at {file}:{frame.lineno} in {function}" if frame is not None and file else "no frame of it"
            return CatalogueHit(
                line=exc.line,
                cause=cause,
                id=f"uncatalogued-{how}",
                exception=exc.type,
                package=file.split("/", 1)[0] if file else "vllm",
                source=where,
                first="",
                last="",
                text=f"{exc.type}: {exc.message}"[:300],
                catalogued=False,
                how=_HOW.get(how, how),
            )
    return None


def _as_a_check(cause: str, how: str, message: str) -> tuple[str, str]:
    """A frameless check's decision: the check tie-break, and words that decide nothing leave
    it a check of the arguments (the class prior)."""
    from triage.parse.message_causes import check_tie_break

    if how == "none":  # a message cut to a few words says too little to be taken for a check
        return ("invalid_arguments", "class") if len(message.strip()) >= MIN_CHECK else (cause, how)
    return check_tie_break(cause, message), how


def _raised(fatal: Signal) -> Iterator[tuple[ev.ExceptionRaised, ev.Frame | None]]:
    """The chain's exceptions, root first, each with its traceback's innermost frame; then the
    fatal line's own exception when no traceback ends in it."""
    seen: set[int] = set()
    for tb in fatal.chain.tracebacks if fatal.chain else []:
        if tb.exception is not None:
            seen.add(tb.exception.line)
            yield tb.exception, tb.frames[-1] if tb.frames else None
    if fatal.exception is not None and fatal.exception.line not in seen:
        yield fatal.exception, None


def _place(frame: ev.Frame | None) -> tuple[str, str]:
    """(file from its package's folder, function) of a frame; a frame in another package gives
    no file (its class alone may say a programming error); no frame: vLLM, no file."""
    if frame is None:
        return _NO_FRAME
    m = _PLACE.search(frame.file)
    return (m.group(1).replace("\\", "/"), frame.func) if m else ("", frame.func)
