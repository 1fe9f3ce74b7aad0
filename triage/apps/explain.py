"""`vllm-triage explain [CAUSE]`: what a cause means, how it shows in a log, how to fix it.

Read from the same two sources the diagnosis uses: the taxonomy (title, signs, fix) and
the rule packs (each rule that names the cause, with its remedies as templates: `{...}`
is a figure computed from the log). Without CAUSE it lists every cause.
"""

from __future__ import annotations

import difflib
import textwrap
from typing import IO

from triage.errors import UsageError
from triage.apps.exit_codes import ArgParser

EXIT_OK = 0
WIDTH = 88


def explain_command(argv: list[str], stdin, stdout: IO[str], stderr: IO[str]) -> int:
    p = ArgParser(prog="vllm-triage explain", description="What a cause means, its signs in a log and its fixes, "
                "from the taxonomy and the rule packs. Without CAUSE: every cause, one a line.")
    p.add_argument("cause", nargs="?", metavar="CAUSE", help="a cause id, e.g. kv_cache_insufficient")
    p.add_argument("--rules", action="append", default=[], metavar="DIR_OR_FILE", help="add a rule pack")
    args = p.parse_args(argv)
    from triage.pipeline import load_rules
    from triage.rule_engine.load import load_taxonomy

    causes = load_taxonomy()
    if args.cause is None:
        width = max(len(c) for c in causes)
        stdout.writelines(f"{c:<{width}}  {_flat(meta.get('title', ''))}\n" for c, meta in causes.items())
        return EXIT_OK
    if args.cause not in causes:
        close = difflib.get_close_matches(args.cause, list(causes), n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(close)}?" if close else "; `vllm-triage explain` lists them"
        raise UsageError(f"unknown cause {args.cause!r}{hint}")
    rules = [r for r in load_rules(args.rules) if r.cause == args.cause]
    from triage.render.sanitise import clean  # user packs' titles and texts are a stranger's words

    stdout.write(clean(describe(args.cause, causes[args.cause], rules)))
    return EXIT_OK


def describe(cause: str, meta: dict, rules: list) -> str:
    """The text for one cause: meaning, signs, fix, then the rules that name it."""
    out = [f"{cause}: {_flat(meta.get('title', ''))}", ""]
    for label, key in (("Signs in a log", "signs"), ("Fix", "fix")):
        if meta.get(key):
            out += [f"{label}:", *_wrap(meta[key], "  "), ""]
    if not rules:
        out.append("No rule names this cause yet: a log with it is reported as unknown_failure.")
        return "\n".join(out) + "\n"
    out.append(f"Rules that name it ({len(rules)}; `{{...}}` is a figure computed from the log):")
    for rule in rules:
        out += ["", f"  {rule.id}: {_flat(rule.title)}"]
        for remedy in rule.remedies:
            cmd = " ".join([*(f"{k}={v.source}" for k, v in remedy.env.items()),
                            *(f"{k} {v.source}".rstrip() for k, v in remedy.flags.items())])
            text = _flat(remedy.text.source)
            out += _wrap(f"{cmd}  {text}" if cmd and text else cmd or text, "    - ", "      ")
        if rule.fires_on:
            out.append(f"    example log: {rule.fires_on[0]}")
    return "\n".join(out) + "\n"


def _wrap(text: str, first: str, rest: str | None = None) -> list[str]:
    return textwrap.wrap(_flat(text), WIDTH, initial_indent=first, subsequent_indent=rest or first,
                         break_on_hyphens=False, break_long_words=False) or [first.rstrip()]


def _flat(text: object) -> str:
    return " ".join(str(text).split())
