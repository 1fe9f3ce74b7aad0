"""Reshapings of whole lines that are not prefixes: a paste cut mid-word, a traceback folded
into one line with literal `\\n`.

`lines.peel` takes prefixes off a line; here a line is mended (the start a paste cut off
is put back) or split (a logger that printed `repr()` of a multi-line message, such as
Triton's Python backend logging a whole traceback in one glog record). Both know record
*shapes* only, never message wording.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from triage.ingest.chat import plain
from triage.ingest.lines import LEVELS, REQUEST_LOG_PREFIXES, peel
from triage.patterns import LazyPattern

# Record heads a paste can cut into, each with what the mended line must then look like.
# (Compiled on first use: only a paste's first line is ever mended.)
_HEADS: tuple[tuple[str, LazyPattern], ...] = (
    ('  File "', LazyPattern(r'  File "[^"]+", line \d+')),
    ("Traceback (most recent call last):", LazyPattern(r"Traceback \(most recent call last\):\s*$")),
    *((f"{level} ", LazyPattern(rf"{level} \d\d-\d\d \d\d:\d\d:\d\d")) for level in LEVELS.split("|")),
    *(
        (head, LazyPattern(r"\([A-Za-z][\w\-]*(?: rank=\d+)? pid=\d+\) "))
        for head in (
            "(APIServer pid=",
            "(EngineCore_DP0 pid=",
            "(EngineCore pid=",
            "(VllmWorker rank=",
            "(RayWorkerWrapper pid=",
            "(VllmWorkerProcess pid=",
            "(Worker_TP0 pid=",
            "(Worker pid=",
        )
    ),
)
MIN_KEPT = 2  # characters of the head that must survive the cut (one letter proves nothing)


def mend_cut_start(text: str) -> str:
    """The first line of a paste that starts mid-word (`le "/usr/lib/...", line 82, in f`,
    `RROR 07-18 ...`): the head it lost put back, when the mended line has the head's shape."""
    if not text or text[0] in " \t(":
        return text
    for head, shape in _HEADS:
        for kept in range(len(head) - 1, MIN_KEPT - 1, -1):
            if text.startswith(head[-kept:]):
                mended = head[:-kept] + text
                if shape.match(mended):
                    return mended
                break
    return text


# A literal backslash-n where a multi-line message was printed as one line: only when what
# follows it is a traceback's own shape (a frame, the head, a chain note).
_FOLDED = LazyPattern(
    r'\\n(?=  File \\?"|Traceback \(most recent call last\)|\s*The above exception'
    rf"|(?:\([A-Za-z][\w\-]*(?: rank=\d+)? pid=\d+\) )?(?:{LEVELS}) \d\d-\d\d \d\d:)"
)  # or a vLLM record's header: a whole log as one JSON string (a log shipper's field, a k8s event)
_LITERAL_NL = LazyPattern(r"\\n")
MAX_PIECES = 400


def unfold(text: str, anchors: Callable[[str], tuple[bool, bool]] | None = None) -> list[str]:
    """The lines of a traceback folded into one line with literal `\\n`, else [text].

    With `anchors` (the scanner's test of a line), a line that is a whole JSON string's body
    (a short paste through a log shipper or a chat's JSON field: `+ exec ...\\n/usr/bin/python3:
    Error ...`) is split too when a piece after its first holds an anchor word by itself:
    a message's own `\\n` before plain text stays one line."""
    if "\\n" not in text:
        return [text]
    if not _FOLDED.search(text):
        return _json_lines(text, anchors) if anchors is not None else [text]
    body = _json_body(text)
    if body is not None:
        return [p for p in body.split("\n", MAX_PIECES) if p.strip()]
    pieces = _LITERAL_NL.split(text, MAX_PIECES)
    return [p.replace('\\"', '"').replace("\\'", "'").replace("\\t", "\t") for p in pieces if p.strip()]


def _json_lines(text: str, anchors: Callable[[str], tuple[bool, bool]]) -> list[str]:
    """The pieces of a JSON string's body when one after the first is an anchored line, else [text]."""
    body = _json_body(plain(text))  # curly quotes a chat client made of its escaped quotes: undone first
    if body is None:
        return [text]
    pieces = [p for p in body.split("\n", MAX_PIECES) if p.strip()]
    if len(pieces) > 1 and any(anchors(p)[0] for p in pieces[1:]):
        return pieces
    return [text]


def _json_body(text: str) -> str | None:
    """The text decoded as a JSON string's body (a log shipper's field: `\\n`, `\\"`, and a
    literal backslash as `\\\\`, so a message's own `\\n` stays one), or None when it is not one."""
    import json

    try:
        body = json.loads(f'"{text}"', strict=False)  # a tab an indenting paste put in stays a tab
    except ValueError:
        return None
    return body if isinstance(body, str) else None


class Unfolded:
    """`scan.iter_marked`'s lines with folded tracebacks split into their lines (each piece
    keeps the physical line's number)."""

    def __init__(
        self, marked: Iterable[tuple[int, str, bool, bool]], classify: Callable[[str], tuple[bool, bool]]
    ) -> None:
        self._marked, self._classify = marked, classify  # classify: scan's matcher (no import circle)

    def __iter__(self) -> Iterator[tuple[int, str, bool, bool]]:
        for no, raw, anchored, bundled in self._marked:
            pieces = unfold(raw, self._classify) if anchored else [raw]
            # A prompt that quotes a traceback is the user's text, whole: its pieces would read as
            # the server's own lines (the request line is dropped whole further on).
            if len(pieces) == 1 or peel(raw, no).text.startswith(REQUEST_LOG_PREFIXES):
                yield no, raw, anchored, bundled
                continue
            for piece in pieces:
                if peel(piece, no).text.startswith(REQUEST_LOG_PREFIXES):  # a whole log unfolded: its request lines
                    yield no, piece, anchored, bundled
                    continue
                grammar, evidence = self._classify(piece)
                yield no, piece, grammar, evidence or bundled
