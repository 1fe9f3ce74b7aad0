"""The command-line conventions every subcommand shares: sizes, colour, the default format, `-`.

One place, so `vllm-triage LOG`, `run`, `--follow` and `batch` read `--max-bytes 20MiB`,
`NO_COLOR` / `FORCE_COLOR` and `VLLM_TRIAGE_FORMAT` the same way.
"""

from __future__ import annotations

import argparse
import os

from triage.errors import UsageError

FORMAT_ENV = "VLLM_TRIAGE_FORMAT"
STDOUT = "-"
MIN_WIDTH = 20
MAX_WIDTH = 1000  # wider than any screen; a width of 1e9 would lay out gigabytes of spaces


def size_arg(text: str) -> int:
    """`--max-bytes 20MiB` (or a plain number of bytes), for argparse."""
    from triage.units import parse_size

    try:
        value = parse_size(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 20MiB, 1GiB, 500000)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 bytes: {text!r}")
    return value


def width_arg(text: str) -> int:
    """`--width N`: a report narrower than MIN_WIDTH cannot show a line number and a word; one
    wider than MAX_WIDTH would only cost memory."""
    try:
        value = int(text) if len(text) <= 12 else None
    except ValueError:
        value = None
    if value is None:
        raise argparse.ArgumentTypeError(f"not a number of columns: {text[:40]!r}") from None
    if not MIN_WIDTH <= value <= MAX_WIDTH:
        raise argparse.ArgumentTypeError(f"must be from {MIN_WIDTH} to {MAX_WIDTH} columns, not {value}")
    return value


def color_wanted(mode: str, to_tty: bool) -> bool:
    """--color always|never wins; then NO_COLOR (any value) turns colour off, FORCE_COLOR on."""
    if mode in ("always", "never"):
        return mode == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR", "").lower() not in ("", "0", "false", "no"):
        return True
    return to_tty


def default_format(to_tty: bool) -> str:
    """The format of a report given no --format: $VLLM_TRIAGE_FORMAT, else terminal on a TTY, else markdown."""
    from triage.render import FORMATS

    chosen = os.environ.get(FORMAT_ENV, "").strip()
    if chosen:
        if chosen not in FORMATS:
            raise UsageError(f"{FORMAT_ENV}={chosen!r} is not a format; must be one of: {', '.join(FORMATS)}")
        return chosen
    return "terminal" if to_tty else "markdown"


def output_path(out: str | None) -> str | None:
    """`-o -` means stdout, as it does for most tools (None: stdout)."""
    return None if out in (None, STDOUT) else out


def report_options(p: argparse.ArgumentParser, source: str) -> None:
    """The options every command that writes a report takes alike (the log's and `run`'s):
    extra rule packs, the terminal's width and colour, and redaction."""
    p.add_argument(
        "--rules",
        action="append",
        default=[],
        metavar="DIR_OR_FILE",
        help="add a rule pack (or a folder of them) to the built-in ones",
    )
    p.add_argument("--width", type=width_arg, default=None, help="terminal report width (20 to 1000 columns)")
    p.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="auto: on a TTY unless NO_COLOR is set, or when FORCE_COLOR is",
    )
    p.add_argument(
        "--no-redact",
        action="store_true",
        help=f"show secrets found in {source} (local use only: never paste such a report)",
    )
