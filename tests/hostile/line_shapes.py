"""Pathological line shapes, and the per-line readers they are aimed at.

A shape is a unit repeated to a length, between a prefix and a suffix (`"a-" * n + "Error"`):
the inputs on which a backtracking regex or a rescanning loop turns super-linear. The test
suite runs every shape through its reader at full size and checks that the answer is
sound (tests/hostile/test_hostile_input.py) and that no regex of the package can
backtrack exponentially (tests/hostile/test_regex_shapes.py); how the time grows with the
length is measured by `benchmarks/linearity.py`, not asserted (speed lives in benchmarks/).
"""

from __future__ import annotations

from collections.abc import Callable

PATHOLOGICAL = [
    " ",
    "(",
    "1",
    "[",
    ",",
    "GiB",
    "GiB ",
    "1.5 GiB, ",
    "a",
    "a.",
    "a-",
    "a_",
    "Error",
    "Error.",
    "\t",
    "'",
    '"',
    "x]",
    ")",
    ":",
    "[rank0]:",
    "(VllmWorker pid=1) ",
    "\x1b[",
    "^[[",
    "#033[",
    "token=",
    "https://",
    "a:b@",
    "-----BEGIN ",
    "{",
    "|",
    "> ",
    "0: ",
    "é",
    "\r",
]

# (unit, prefix, suffix) aimed at line peeling and the grammar
LINEAR_SHAPES = [
    (" ", "", "x]"),
    (" ", "", "x)"),
    ("\t", "", ")"),
    ("(", "", ""),
    ("1", "", ": error: "),
    ("[", "", ""),
    (",", "", ""),
    ("GiB", "", ""),
    ("1.5 GiB, ", "CUDA out of memory. Tried to allocate ", ""),
    ("a", "", ": error: "),
    ("a.", "", " has no vLLM implementation"),
    ("a-", "", ""),
    ("1", "", " is not divisible by 2"),
    ("Error", "", ""),
    ("Error.", "", ""),
    ("a", "", "Error"),
    ("(", "ValueError: ", ")"),
    ("'", "", ""),
    ("[rank0]:", "", ""),
    ("(VllmWorker pid=1) ", "", ""),
    ("\x1b[", "", ""),
    ("0: ", "", ""),
    ("> ", "", ""),
    ("1", "INFO 01-01 00:00:00 [x.py:1] max seq len (", ")"),
    ("é", "", "Error"),
]

# units aimed at the secret patterns
REDACT_SHAPES = [
    " ",
    "a",
    "a-",
    "a.",
    "token",
    "a-token=x ",
    "https://",
    "a://b:",
    "hf_",
    "sk-",
    "bearer ",
    "-----BEGIN RSA PRIVATE KEY-----",
    "'",
    "token='",
    "[",
    "--api-key ",
    "@",
]

# (unit, prefix, suffix) aimed at the nvidia-smi and fuser row readers (lazy names between runs
# of spaces); the reader strips lines, so runs of spaces need a suffix to stay
BUNDLE_SHAPES = [
    (" ", "|", "x"),
    (" ", "| 0 ", "On x"),
    (" ", "| 0 ", "x Off"),
    (" ", "| 0 1 C ", "1 x"),
    (" ", "| 0 N/A N/A 7 C ", "1MiB"),
    (" ", "| 0 ", ""),
    (" 1", "| 0 ", ""),
    (" a", "| 0 ", ""),
    (" x1 ", "| 0 1 2 C ", ""),
    (" 1", "|    0   N/A  N/A      2345      C   ", ""),
    (" N/A", "| 0 ", ""),
    (" On", "| 0 ", " x"),
    (" 1MiB", "| 0 1 C ", ""),
    ("MiB ", "| ", ""),
    (" ", "NVIDIA-SMI ", ""),
    (" ", "/dev/nvidia0: ", ""),
]


def shape(unit: str, prefix: str = "", suffix: str = "") -> Callable[[int], str]:
    """A maker of the shape at a length: `unit` repeated to n characters, framed."""
    return lambda n: prefix + (unit * (n // len(unit) + 1))[:n] + suffix


def peel_parse(text: str) -> list:
    """Peel one line and parse it afresh (the parser remembers texts: the memo is emptied)."""
    from triage.ingest.lines import peel
    from triage.parse.parse import _SEEN, parse_line_detail

    _SEEN.clear()
    events, _ = parse_line_detail(peel(text, 1))
    return events


def redact(text: str) -> str:
    from triage.diagnose.redact import redact_text

    return redact_text(text)


def read_bundle_line(text: str) -> None:
    from triage.ingest.lines import Line
    from triage.parse.sysinfo import BundleReader

    BundleReader().read(Line(no=1, text=text, raw=text))


def scan_anchors(text: str) -> list:
    from triage.parse.grammar import anchors

    pattern, _ = anchors()
    return list(pattern.finditer(text))


def families() -> list[tuple[str, Callable[[str], object], list[tuple[str, str, str]]]]:
    """(label, reader, shapes) for each per-line reader and the shapes aimed at it."""
    return [
        ("peel+parse", peel_parse, LINEAR_SHAPES),
        ("redact", redact, [(u, "", "") for u in REDACT_SHAPES]),
        ("bundle", read_bundle_line, BUNDLE_SHAPES),
        ("anchors", scan_anchors, [(u, "", "") for u in PATHOLOGICAL]),
    ]
