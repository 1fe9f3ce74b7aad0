"""The command line: arguments, exit codes, and the one place errors become one line on stderr.

Exit codes (a contract): 0 no failure found, 1 a failure found (diagnosed or not),
2 usage, input or rule-pack error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import IO

from . import __version__
from .errors import RulePackError, TriageError, UsageError

EXIT_OK, EXIT_FAILURE_FOUND, EXIT_ERROR = 0, 1, 2
# Subcommands live in their own modules, imported only when used: "name": "module:function".
# Each function takes (argv, stdin, stdout, stderr) and returns an exit code.
SUBCOMMANDS: dict[str, str] = {
    "rules": "triage.rules_cli:rules_command",
    "schema": "triage.cli:schema_command",
    "run": "triage.live:run_command",
    "serve": "triage.serve:serve_command",
    "batch": "triage.batch:batch_command",
}


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so main() owns every exit code."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


class _FormatAction(argparse.Action):
    """`-f json -o a.json -f markdown -o a.md -f terminal`: each --output binds to the --format before it."""

    def __call__(self, parser, namespace, values, option_string=None):
        pairs = list(getattr(namespace, self.dest) or [])
        pairs.append([values, None])
        setattr(namespace, self.dest, pairs)


class _OutputAction(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        pairs = list(getattr(namespace, self.dest) or [])
        if not pairs or pairs[-1][1] is not None:
            pairs.append([None, values])  # format decided later (the default)
        else:
            pairs[-1][1] = values
        setattr(namespace, self.dest, pairs)


def _triage_parser() -> argparse.ArgumentParser:
    from .render import FORMATS

    p = _Parser(prog="vllm-triage", description="Explain why a vLLM server failed to start, from its log.",
                epilog="Other commands: `vllm-triage rules check|test|list`, `vllm-triage schema`, "
                   "`vllm-triage batch DIR_OR_GLOB...`.")
    p.add_argument("paths", nargs="*", metavar="LOG", help="log file(s), '-' for stdin; gzip is read as is")
    p.add_argument("--follow", metavar="FILE", help="follow a log being written (from its start) until the "
                   "server is ready, fails, or --timeout passes")
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="with --follow: stop after this long")
    p.add_argument("-f", "--format", choices=FORMATS, action=_FormatAction, dest="outputs", default=[],
                   help="report format (default: terminal on a TTY, else markdown); repeat for several reports")
    p.add_argument("-o", "--output", metavar="FILE", action=_OutputAction, dest="outputs",
                   help="write the report of the preceding --format to FILE instead of stdout")
    p.add_argument("--rules", action="append", default=[], metavar="DIR_OR_FILE",
                   help="add a rule pack (or a folder of them) to the built-in ones")
    p.add_argument("--width", type=int, default=None, help="terminal report width")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    p.add_argument("--no-redact", action="store_true",
                   help="show secrets found in the log (local use only: never paste such a report)")
    p.add_argument("--max-bytes", type=int, default=None, help="refuse inputs larger than this")
    p.add_argument("--traceback", action="store_true", help="show Python tracebacks of internal errors")
    p.add_argument("--version", action="version", version=f"vllm-triage {__version__}")
    return p


def main(argv: Sequence[str] | None = None, stdin: IO[bytes] | None = None, stdout: IO[str] | None = None,
         stderr: IO[str] | None = None) -> int:
    """Run the CLI in-process (tests call this); returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    show_traceback = "--traceback" in argv
    redact = "--no-redact" not in argv
    try:
        if argv and argv[0] in SUBCOMMANDS:
            return _subcommand(argv, stdin, stdout, stderr)
        return _triage(argv, stdin, stdout, stderr)
    except TriageError as exc:
        if show_traceback:
            import traceback

            traceback.print_exc(file=stderr)
        if isinstance(exc, RulePackError):
            for problem in exc.problems:
                stderr.write(_error_line(problem, redact))
        else:
            stderr.write(_error_line(str(exc), redact, own=isinstance(exc, UsageError)))
        return EXIT_ERROR
    except KeyboardInterrupt:
        stderr.write("vllm-triage: interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the one top-level handler: never a raw traceback
        if show_traceback:
            import traceback

            traceback.print_exc(file=stderr)
        detail = f"internal error: {type(exc).__name__}: {str(exc)[:300]} (run with --traceback for details)"
        stderr.write(_error_line(detail, redact))
        return EXIT_ERROR


def _error_line(message: str, redact: bool = True, own: bool = False) -> str:
    """One line on stderr, whatever the message holds (a YAML error spans lines; a path may hold a token).

    `own`: the tool's words about the user's command line (a usage error): only secrets known
    by their shape are masked there, so "VLLM_TRIAGE_TOKEN: set it" stays a sentence.
    """
    from .redact import redact_shapes, redact_text

    text = " ".join(message.split())
    if redact:
        text = redact_shapes(text) if own else redact_text(text)
    return f"vllm-triage: {text}\n"


NO_REDACT_WARNING = ("vllm-triage: warning: --no-redact shows secrets from the log unmasked; "
                     "keep this report local, never paste it\n")


def _triage(argv: list[str], stdin: IO[bytes] | None, stdout: IO[str], stderr: IO[str] | None = None) -> int:
    from .pipeline import Options, load_rules, run
    from .read import open_source

    args = _triage_parser().parse_args(argv)
    if args.no_redact:
        (stderr or sys.stderr).write(NO_REDACT_WARNING)
    if args.follow is not None or args.timeout is not None:
        from .live import follow_command

        return follow_command(args, stdout)
    if not args.paths:
        raise UsageError("the following arguments are required: LOG")
    is_tty = hasattr(stdout, "isatty") and stdout.isatty()
    targets = [(fmt or ("terminal" if is_tty and not out else "markdown"), out) for fmt, out in args.outputs]
    targets = targets or [("terminal" if is_tty else "markdown", None)]
    if sum(1 for _, out in targets if out is None) > 1:
        raise UsageError("more than one --format writes to stdout; give the others an --output FILE")
    options = Options(redact=not args.no_redact, extra_rules=args.rules, max_bytes=args.max_bytes)
    rules = load_rules(args.rules)
    reports, worst = [], EXIT_OK
    for path in args.paths:
        stream, name = open_source(path, stdin)
        try:
            report = run(stream, name, options, rules)
        finally:
            if path != "-":
                stream.close()
        reports.append(report)
        failed = report.outcome == "failed" or bool(report.diagnoses)
        worst = max(worst, EXIT_FAILURE_FOUND if failed else EXIT_OK)
    for fmt, out in targets:
        to_tty = out is None and is_tty
        color = args.color == "always" or (args.color == "auto" and to_tty and not os.environ.get("NO_COLOR"))
        width = args.width or (_terminal_width() if to_tty else 100)
        text = render_all(reports, fmt, options.redact, width=width, color=color)
        _write(text, out, stdout)
    if os.environ.get("GITHUB_STEP_SUMMARY") and any(fmt == "github" for fmt, _ in targets):
        _append_step_summary(os.environ["GITHUB_STEP_SUMMARY"], render_all(reports, "markdown", options.redact))
    return worst


def render_all(reports: list, fmt: str, redact: bool = True, **render_options) -> str:
    """Render each report in one format.

    No redaction here: the pipeline redacted every log line whole before anything was cut,
    so the report holds no secret (`redact` stays for callers); a pass over the laid-out
    text would mask the tool's own words and break lines the layout already measured.
    """
    from .render import render

    return _join([render(report, fmt, **render_options) for report in reports], fmt)


def _write(text: str, out: str | None, stdout: IO[str]) -> None:
    if out is None:
        stdout.write(text)
        return
    try:
        with open(out, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None


def _join(chunks: list[str], fmt: str) -> str:
    if fmt == "json" and len(chunks) > 1:  # several logs: one JSON object per line (JSON Lines)
        import json

        return "".join(json.dumps(json.loads(c), ensure_ascii=False) + "\n" for c in chunks)
    from .render import join

    return join(chunks, fmt)


def _append_step_summary(path: str, markdown: str) -> None:
    """GitHub Actions shows what a step appends to $GITHUB_STEP_SUMMARY on the run's page."""
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(markdown + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write GITHUB_STEP_SUMMARY {path}: {exc.strerror or exc}") from None


def _terminal_width() -> int:
    try:
        return max(60, min(os.get_terminal_size().columns, 160))
    except OSError:
        return 100


def _subcommand(argv: list[str], stdin, stdout: IO[str], stderr: IO[str]) -> int:
    import importlib

    module, func = SUBCOMMANDS[argv[0]].split(":")
    return getattr(importlib.import_module(module), func)(argv[1:], stdin, stdout, stderr)


def schema_command(argv: list[str], stdin, stdout: IO[str], stderr: IO[str]) -> int:
    """`vllm-triage schema`: the JSON Schema of the report (a published contract)."""
    import json

    from .report import json_schema

    stdout.write(json.dumps(json_schema(), indent=2) + "\n")
    return EXIT_OK


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
