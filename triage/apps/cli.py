"""The command line: arguments, the subcommand table, and the one place errors become one line
on stderr.

Exit codes (a contract, in `exit_codes.py`): 0 no failure found, 1 a failure found (diagnosed
or not), 2 usage, input or rule-pack error (also when one of several logs could not be read).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import IO

from triage import __version__
from triage.apps.exit_codes import EXIT_ERROR, EXIT_OK, ArgParser, exit_code
from triage.apps.output import NO_REDACT_WARNING, isatty, render_all, terminal_width, write
from triage.errors import RulePackError, TriageError, UsageError

# Subcommands live in their own modules, imported only when used: "name": "module:function".
# Each function takes (argv, stdin, stdout, stderr) and returns an exit code.
SUBCOMMANDS: dict[str, str] = {
    "rules": "triage.apps.rules_cmd:rules_command",
    "schema": "triage.apps.cli:schema_command",
    "run": "triage.apps.live.run:run_command",
    "serve": "triage.apps.serve:serve_command",
    "batch": "triage.apps.batch:batch_command",
    "explain": "triage.apps.explain:explain_command",
    "what-if": "triage.apps.what_if:what_if_command",
    "plan": "triage.plan.command:plan_command",
    "completion": "triage.apps.completion:completion_command",
}
# One line each for `vllm-triage --help` (a subcommand without one is still listed).
SUMMARIES: dict[str, str] = {
    "run": "-- CMD: run the server, pass its output through, explain a failed start",
    "batch": "DIR_OR_GLOB...: many logs in parallel, a table of causes, JSON Lines",
    "explain": "CAUSE: what a cause means, its signs and fixes, the rules that name it",
    "what-if": "LOG [FLAGS]: would these flags pass vLLM's memory checks, with the margins",
    "plan": "--model PATH_OR_ID --gpu NAME [vllm serve flags]: size a launch before it runs",
    "rules": "check|test|list: validate, exercise, list the rule packs",
    "schema": "the JSON Schema of the report",
    "serve": "the HTTP backend for chat bots and CI (extra: [server])",
    "completion": "bash|zsh|fish: the shell completion script",
}
EXIT_STATUS = """exit status:
  0  no failure found (a healthy, incomplete or recovered log), or --exit-zero
  1  a failure was found in some log (diagnosed or not)
  2  usage, input or rule-pack error; also when one of several logs could not be read
     (the others are still reported)"""
ENVIRONMENT = """environment:
  VLLM_TRIAGE_FORMAT  default --format (else terminal on a TTY, markdown otherwise)
  NO_COLOR            no colour; FORCE_COLOR: colour even off a TTY (--color wins over both)
  GITHUB_STEP_SUMMARY with -f github: the Markdown report is appended there (kept under 1 MiB)
  VLLM_TRIAGE_NO_CONFIG  set: read no settings file (as --no-config)

settings file: .vllm-triage.toml, or [tool.vllm-triage] in pyproject.toml, the first found
  from the working directory upward (keys: format, rules, ignore, min-confidence); the
  command line and VLLM_TRIAGE_FORMAT win over it"""


class _FormatAction(argparse.Action):
    """`-f json -o a.json -f markdown -o a.md -f terminal`: each --output binds to the --format before it;
    a --format right after a bare `-o -` is that stdout report's (`-o - -f json`)."""

    def __call__(self, parser, namespace, values, option_string=None):
        pairs = list(getattr(namespace, self.dest) or [])
        if pairs and pairs[-1][0] is None and pairs[-1][1] == "-":
            pairs[-1][0] = values
        else:
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


def _epilog() -> str:
    width = max(len(name) for name in SUBCOMMANDS) + 2
    commands = "\n".join(f"  {name:<{width}}{SUMMARIES.get(name, '')}" for name in SUBCOMMANDS)
    return (
        f"commands (vllm-triage COMMAND --help for each):\n{commands}\n\n{EXIT_STATUS}\n\n{ENVIRONMENT}\n\n"
        "The tool is not on PyPI yet: install it from a checkout, a wheel or git (see the README)."
    )


def _triage_parser() -> argparse.ArgumentParser:
    from triage.render import FORMATS

    p = ArgParser(
        prog="vllm-triage",
        description="Explain why a vLLM server failed to start, from its log.",
        usage="vllm-triage [options] LOG [LOG ...]\n       vllm-triage COMMAND [options] ...",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("paths", nargs="*", metavar="LOG", help="log file(s), '-' for stdin; gzip is read as is")
    p.add_argument(
        "--follow",
        metavar="FILE",
        help="follow a log being written (from its start) until the server is ready, fails, or --timeout passes",
    )
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="with --follow: stop after this long")
    p.add_argument(
        "-f",
        "--format",
        choices=FORMATS,
        action=_FormatAction,
        dest="outputs",
        default=[],
        help="report format (default: $VLLM_TRIAGE_FORMAT, else terminal on a TTY, else markdown); "
        "repeat for several reports",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        action=_OutputAction,
        dest="outputs",
        help="write the report of the preceding --format to FILE ('-': stdout)",
    )
    p.add_argument(
        "-q", "--quiet", action="store_true", help="one line per log on stdout (files still get their full reports)"
    )
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when a failure is found (errors stay 2)")
    p.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="CAUSE",
        help="do not report this cause (repeat, or separate with commas); a note says so",
    )
    p.add_argument(
        "--min-confidence",
        metavar="F",
        default=None,
        help="do not report diagnoses whose confidence is below F (0 to 1)",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="read the settings from FILE, not the .vllm-triage.toml or pyproject.toml found upward",
    )
    p.add_argument("--no-config", action="store_true", help="read no settings file")
    _add_output_options(p)
    return p


def _add_output_options(p: argparse.ArgumentParser) -> None:
    """Rule packs, the look of the report, redaction, limits, and the version."""
    from triage.apps.conventions import report_options, size_arg

    report_options(p, "the log")
    p.add_argument(
        "--max-bytes", type=size_arg, default=None, metavar="SIZE", help="refuse inputs larger than this (e.g. 20MiB)"
    )
    p.add_argument("--traceback", action="store_true", help="show Python tracebacks of internal errors")
    p.add_argument("-V", "--version", action="version", version=f"vllm-triage {__version__}")


def main(
    argv: Sequence[str] | None = None,
    stdin: IO[bytes] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """Run the CLI in-process (tests call this); returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    show_traceback = "--traceback" in argv
    redact = "--no-redact" not in argv
    try:
        with contextlib.redirect_stdout(stdout):  # argparse prints --help and --version to sys.stdout
            if argv and argv[0] in SUBCOMMANDS:
                return _subcommand(argv, stdin, stdout, stderr)
            _refuse_mistyped_command(argv)
            return _triage(argv, stdin, stdout, stderr)
    except SystemExit as exc:  # --help, --version: argparse's own exit
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except TriageError as exc:
        if show_traceback:
            import traceback

            traceback.print_exc(file=stderr)
        if isinstance(exc, RulePackError):
            for problem in exc.problems:
                stderr.write(_error_line(str(problem), redact))
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
        if isinstance(exc, OSError) and exc.filename is not None:  # a path the system refused: the user's to fix
            detail = f"cannot use {os.fsdecode(exc.filename)}: {exc.strerror or exc}"
        stderr.write(_error_line(detail, redact))
        return EXIT_ERROR


def _refuse_mistyped_command(argv: list[str]) -> None:
    """`vllm-triage explian x`: a first word close to a command and naming no file is a typo, not a log."""
    word = argv[0] if argv else ""
    if not word or word.startswith("-") or os.path.sep in word or "." in word or os.path.exists(word):
        return
    import difflib  # only for a first word that may be a mistyped command

    near = difflib.get_close_matches(word, list(SUBCOMMANDS), n=1, cutoff=0.7)
    if near:
        raise UsageError(f"unknown command {word!r} (did you mean {near[0]}?); a log named so does not exist")


def _error_line(message: str, redact: bool = True, own: bool = False) -> str:
    """One line on stderr, whatever the message holds (a YAML error spans lines; a path may hold a token).

    `own`: the tool's words about the user's command line (a usage error): only secrets known
    by their shape are masked there, so "VLLM_TRIAGE_TOKEN: set it" stays a sentence.
    """
    from triage.diagnose.redaction import policy
    from triage.render.sanitise import clean

    text = clean(" ".join(message.split()), name=True)
    text = policy(redact).own_words(text) if own else policy(redact).text(text)
    return f"vllm-triage: {text}\n"


def _settle(args) -> None:
    """The settings file under the command line: rules added, causes ignored, the floor, the format."""
    from triage.apps import config

    settings = (
        config.Config()
        if args.no_config or (args.config is None and not config.from_env())
        else config.load(args.config)
    )
    args.rules = [*settings.rules, *args.rules]
    args.ignore = [*settings.ignore, *config.check_causes(args.ignore, "--ignore")]
    args.min_confidence = (
        settings.min_confidence
        if args.min_confidence is None
        else config.confidence(args.min_confidence, "--min-confidence")
    )
    if settings.formats and not os.environ.get("VLLM_TRIAGE_FORMAT"):
        args.outputs = [[fmt or settings.formats[0], out] for fmt, out in args.outputs] or [[settings.formats[0], None]]


# `-o FILE` with no --format: the format its extension names (else the default one).
_EXTENSIONS = {".json": "json", ".jsonl": "json", ".md": "markdown", ".markdown": "markdown", ".xml": "junit"}


def _format_of(out: str | None) -> str | None:
    if out is None or out == "-":
        return None
    return _EXTENSIONS.get(os.path.splitext(out)[1].lower())


def _triage(argv: list[str], stdin: IO[bytes] | None, stdout: IO[str], stderr: IO[str] | None = None) -> int:
    from triage.api import Triager
    from triage.apps import filters
    from triage.apps.conventions import output_path

    args = _triage_parser().parse_args(argv)
    stderr = stderr or sys.stderr
    _settle(args)
    args.outputs = [[fmt or _format_of(out), output_path(out)] for fmt, out in args.outputs]
    if args.no_redact:
        stderr.write(NO_REDACT_WARNING)
    if args.follow is not None or args.timeout is not None:
        from triage.apps.live.follow import follow_command

        return follow_command(args, stdout)
    if not args.paths:
        raise UsageError("the following arguments are required: LOG")
    if args.paths.count("-") > 1:
        raise UsageError("'-' (stdin) can be read only once; give it once")
    targets = _targets(args, stdout)
    triager = Triager(args.rules, redact=not args.no_redact, max_bytes=args.max_bytes)
    reports, unreadable = _triage_paths(args.paths, stdin, triager, stderr, args.traceback)
    if unreadable and any(fmt == "github" and out is None for fmt, out in targets):
        from triage.render.github import command

        stdout.write(
            "".join(command("error", message, title="vllm-triage: a log could not be read") for message in unreadable)
        )
    reports = [filters.apply(r, args.ignore, args.min_confidence) for r in reports]
    worst = exit_code(reports)
    if reports:
        _render_targets(reports, targets, args, stdout, triager.redact)
    if unreadable:
        return EXIT_ERROR
    return EXIT_OK if args.exit_zero else worst


def _targets(args, stdout: IO[str]) -> list[tuple[str, str | None]]:
    """(format, file or None for stdout) for each report to write; at most one goes to stdout."""
    from triage.apps.conventions import default_format

    is_tty = isatty(stdout)
    targets = [(fmt or default_format(is_tty and not out), out) for fmt, out in args.outputs]
    targets = targets or [(default_format(is_tty), None)]
    if sum(1 for _, out in targets if out is None) > 1:
        raise UsageError("more than one --format writes to stdout; give the others an --output FILE")
    if args.quiet and not any(out is None for _, out in targets):
        targets.append(("quiet", None))
    return [("quiet" if args.quiet and out is None else fmt, out) for fmt, out in targets]


def _triage_paths(
    paths: list[str], stdin, triager, stderr: IO[str], show_traceback: bool = False
) -> tuple[list, list[str]]:
    """A report per readable log, named by the path as given; each unreadable one is a line on stderr
    (and its message is returned, for the annotations of `-f github`)."""
    from triage.errors import InputError
    from triage.ingest.read import open_source

    reports: list = []
    unreadable: list[str] = []
    for path in paths:
        try:
            stream, _ = open_source(path, stdin)
            try:
                reports.append(triager.triage_stream(stream, "<stdin>" if path == "-" else path))
            finally:
                if path != "-":
                    stream.close()
        except InputError as exc:
            if show_traceback:
                import traceback

                traceback.print_exc(file=stderr)
            name = "<stdin>" if path == "-" else path
            message = str(exc) if name in str(exc) else f"{name}: {exc}"  # say which of several logs
            line = _error_line(message, triager.redact)
            stderr.write(line)
            unreadable.append(line[len("vllm-triage: ") :].rstrip("\n"))
    return reports, unreadable


def _render_targets(reports: list, targets, args, stdout: IO[str], redact: bool) -> None:
    from triage.apps.conventions import color_wanted

    is_tty = isatty(stdout)
    for fmt, out in targets:
        to_tty = out is None and is_tty
        width = args.width or (terminal_width() if to_tty else 100)
        text = render_all(reports, fmt, width=width, color=color_wanted(args.color, to_tty))
        write(text, out, stdout, inputs=args.paths)
    if os.environ.get("GITHUB_STEP_SUMMARY") and any(fmt == "github" for fmt, _ in targets):
        from triage.render.step_summary import append_step_summary

        append_step_summary(os.environ["GITHUB_STEP_SUMMARY"], reports)


def _subcommand(argv: list[str], stdin, stdout: IO[str], stderr: IO[str]) -> int:
    import importlib

    module, func = SUBCOMMANDS[argv[0]].split(":")
    return getattr(importlib.import_module(module), func)(argv[1:], stdin, stdout, stderr)


def schema_command(argv: list[str], stdin, stdout: IO[str], stderr: IO[str]) -> int:
    """`vllm-triage schema [-o FILE]`: the JSON Schema of the report (a published contract)."""
    import json

    from triage.apps.conventions import output_path
    from triage.model.report import json_schema

    p = ArgParser(
        prog="vllm-triage schema",
        description="Print the JSON Schema of the report (and of batch's "
        "error records, under $defs) that `--format json` and `batch --jsonl` follow.",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write it to FILE instead of stdout ('-': stdout)")
    args = p.parse_args(argv)
    write(json.dumps(json_schema(), indent=2) + "\n", output_path(args.output), stdout)
    return EXIT_OK


def entry() -> None:
    """Console-script entry point.

    The objects of a run (grammar, rules, report) die with the process; the interpreter's
    orderly teardown of them costs ~50 ms, a sixth of a small log's run. So once the output
    is flushed the process ends at once, unless a thread or a child process (serve, run --,
    batch) may still need that orderly exit.

    The cycle collector runs less often (every 100 000 net allocations, not 700): start-up
    allocates tens of thousands of objects that all live on (modules, the grammar, the
    rules), and each young-generation pass over them cost ~5 ms while finding almost nothing
    (at 20 000, two such passes were ~8% of a small log's run; at 100 000 a small log or a
    2 MB startup needs none). Peak memory is the same to the MiB on the benchmark's logs
    (restart loops, chained tracebacks, nvidia-smi tables, serving logs)."""
    import gc

    gc.set_threshold(100_000, 20, 20)
    code = main()
    if not _teardown_needed():
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed pipe, a closed stream: let the normal exit say so
            sys.exit(code)
        os._exit(code)
    sys.exit(code)


def _teardown_needed() -> bool:
    import threading

    return threading.active_count() > 1 or "multiprocessing" in sys.modules or "concurrent" in sys.modules


if __name__ == "__main__":
    entry()
