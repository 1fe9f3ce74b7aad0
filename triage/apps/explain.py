"""`vllm-triage explain [CAUSE | RULE]`: what a cause means, how it shows in a log, how to fix it.

Read from the same two sources the diagnosis uses: the taxonomy (title, signs, fix) and
the rule packs (each rule that names the cause, with its remedies: a figure the rule
computes from the log is shown as `<name>`, never as the template's code). A rule id
explains its cause with that rule alone. Without an argument it lists every cause. An
example log is cited only where it exists (a checkout has them, an install does not).
"""

from __future__ import annotations

import difflib
import re
import textwrap
from pathlib import Path
from typing import IO

from triage.apps.exit_codes import ArgParser
from triage.errors import UsageError

EXIT_OK = 0
WIDTH = 88


def explain_command(argv: list[str], stdin, stdout: IO[str], stderr: IO[str]) -> int:
    p = ArgParser(
        prog="vllm-triage explain",
        description="What a cause means, its signs in a log and its fixes, "
        "from the taxonomy and the rule packs. Without CAUSE: every cause, one a line.",
    )
    p.add_argument(
        "cause",
        nargs="?",
        metavar="CAUSE",
        help="a cause id (e.g. kv_cache_insufficient) or a rule id (e.g. kv-needed-exceeds-available)",
    )
    p.add_argument("--rules", action="append", default=[], metavar="DIR_OR_FILE", help="add a rule pack")
    args = p.parse_args(argv)
    from triage.pipeline import load_rules
    from triage.rule_engine.load import load_taxonomy

    causes = load_taxonomy()
    if args.cause is None:
        width = max(len(c) for c in causes)
        stdout.writelines(f"{c:<{width}}  {_flat(meta.get('title', ''))}\n" for c, meta in causes.items())
        return EXIT_OK
    every = load_rules(args.rules)
    by_id = {r.id: r for r in every}
    if args.cause in by_id:
        rule = by_id[args.cause]
        stdout.write(describe(rule.cause, causes.get(rule.cause, {}), [rule]))
        return EXIT_OK
    if args.cause not in causes:
        close = difflib.get_close_matches(args.cause, [*causes, *by_id], n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(close)}?" if close else "; `vllm-triage explain` lists them"
        raise UsageError(f"unknown cause or rule {args.cause!r}{hint}")
    rules = [r for r in every if r.cause == args.cause]
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
    out.append(f"Rules that name it ({len(rules)}; <...> is a figure the rule computes from the log):")
    for rule in rules:
        out += ["", f"  {rule.id}: {_flat(rule.title)}"]
        named = {k: v.source for k, v in rule.pack_figures.items()}
        for remedy in rule.remedies:
            cmd = " ".join(
                [
                    *(f"{k}={_figures(v.source, named)}" for k, v in remedy.env.items()),
                    *(f"{k} {_figures(v.source, named)}".rstrip() for k, v in remedy.flags.items()),
                ]
            )
            text = _flat(_figures(remedy.text.source, named))
            if cmd:  # a command on a line of its own, never wrapped: copied, it stays one command
                out.append(f"    - {cmd}")
                out += _wrap(text, "        ") if text else []
            else:
                out += _wrap(text, "    - ", "      ")
        example = next((f for f in rule.fires_on if (_ROOT / f).is_file()), None)
        if example:
            out.append(f"    example log: {example}")
    return "\n".join(out) + "\n"


_ROOT = Path(__file__).resolve().parents[2]  # a checkout's root: where fixtures/ is, when it is there
_TEMPLATE = re.compile(r"\{([^{}]*)\}")
_LITERAL = re.compile(r"'([^']*)'|\"([^\"]*)\"")
_NAME = re.compile(r"^[A-Za-z_][\w.]*$")


def _figures(template: str, named: dict[str, str] | None = None) -> str:
    """A remedy template as a person reads it: each `{expression|filter}` becomes `<name>`
    (a choice between words: `<fp8_e5m2 or fp8>`; any other computation: `<computed>`).
    `named`: the pack's figures (name -> expression), read as the expression they name."""

    def one(m: re.Match) -> str:
        expr = m.group(1).rsplit("|", 1)[0].strip()
        expr = (named or {}).get(expr, expr)
        if _NAME.match(expr):
            return f"<{expr.rsplit('.', 1)[-1]}>"
        words = [a or b for a, b in _LITERAL.findall(re.sub(r"\([^()]*\)", "", expr))]  # not a call's arguments
        if words:
            return "<" + " or ".join(dict.fromkeys(words)) + ">"
        return "<computed>"

    text = str(template).replace("{{", "\0").replace("}}", "\1")  # `{{` is a literal brace
    return _TEMPLATE.sub(one, text).replace("\0", "{").replace("\1", "}")


def _wrap(text: str, first: str, rest: str | None = None) -> list[str]:
    return textwrap.wrap(
        _flat(text),
        WIDTH,
        initial_indent=first,
        subsequent_indent=rest or first,
        break_on_hyphens=False,
        break_long_words=False,
    ) or [first.rstrip()]


def _flat(text: object) -> str:
    return " ".join(str(text).split())
