"""`vllm-triage rules check|test|list`: rule packs validated, exercised and listed."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from triage.apps.exit_codes import ArgParser
from triage.errors import UsageError

EXIT_OK, EXIT_FAIL = 0, 1


def rules_command(argv: list[str], stdin, stdout: IO[str], stderr: IO[str] | None = None) -> int:
    p = ArgParser(prog="vllm-triage rules")
    p.add_argument("action", choices=("check", "test", "list"))
    p.add_argument("packs", nargs="*", help="extra rule packs or folders (the built-in ones are always included)")
    p.add_argument(
        "--root",
        default=".",
        help="folder that fires_on/quiet_on paths are relative to (for the "
        "built-in rules: a checkout of vllm-triage; an installed copy ships no fixtures)",
    )
    args = p.parse_args(argv)
    from triage.pipeline import load_rules

    rules = load_rules(args.packs)  # raises RulePackError listing every problem (exit 2)
    if args.action == "check":
        from triage.rule_engine.op_budget import ATTEMPT_OPS, PLANNED_EVENTS, planned_cost

        costs = {r.id: planned_cost(r) for r in rules}
        worst = max(costs, key=lambda rule_id: costs[rule_id]) if costs else None
        stdout.write(
            f"ok: {len(rules)} rules; evaluation cost at most {sum(costs.values()):,} of {ATTEMPT_OPS:,} "
            f"operations per startup attempt (with {PLANNED_EVENTS:,} events of each bound kind)"
            + (f"; costliest rule {worst!r}: {costs[worst]:,}" if worst else "")
            + "\n"
        )
        return EXIT_OK
    if args.action == "list":
        from triage.render.sanitise import clean  # a pack's words are a stranger's text

        for r in rules:
            stdout.write(clean(f"{r.id:40s} {r.cause:32s} {r.title}", name=True) + "\n")
        return EXIT_OK
    _check_root(rules, Path(args.root))
    return _test(rules, Path(args.root), stdout)


def _check_root(rules, root: Path) -> None:
    """Not one fires_on/quiet_on log under --root: the wrong folder, not 118 failing rules."""
    wanted = [rel for rule in rules for rel in (*rule.fires_on, *rule.quiet_on)]
    if wanted and not any((root / rel).exists() for rel in wanted):
        raise UsageError(
            f"none of the rules' fires_on/quiet_on logs is under {root.resolve()}: the built-in "
            "rules' fixtures are not installed with the package; run `vllm-triage rules test "
            "--root PATH` with PATH a checkout of vllm-triage (its fixtures/ folder)"
        )


def _test(rules, root: Path, stdout: IO[str]) -> int:
    """Each rule must fire on every `fires_on` log and stay quiet on every `quiet_on` log."""
    from triage.pipeline import Options, run_path

    failures = 0
    cache: dict[Path, list[str]] = {}

    def fired(path: Path) -> list[str]:
        if path not in cache:
            report = run_path(path, Options())
            cache[path] = [r for d in report.diagnoses for r in (d.rule, *d.supporting_rules)]
        return cache[path]

    for rule in rules:
        if not rule.fires_on:  # a rule no log exercises was not tested: not a pass
            stdout.write(f"UNTESTED {rule.id}: no fires_on log (add one it must fire on, and a quiet_on near miss)\n")
            failures += 1
        for rel in rule.fires_on:
            path = root / rel
            if not path.exists():
                _say(stdout, f"MISSING {rule.id}: {rel}")
                failures += 1
            elif rule.id not in fired(path):
                _say(stdout, f"FAIL    {rule.id} did not fire on {rel} (fired: {', '.join(fired(path)) or 'nothing'})")
                failures += 1
        for rel in rule.quiet_on:
            path = root / rel
            if not path.exists():
                _say(stdout, f"MISSING {rule.id}: {rel}")
                failures += 1
            elif rule.id in fired(path):
                _say(stdout, f"FAIL    {rule.id} fired on its near-miss {rel}")
                failures += 1
    stdout.write(f"{'ok' if not failures else 'FAILED'}: {len(rules)} rules, {failures} problem(s)\n")
    return EXIT_OK if not failures else EXIT_FAIL


def _say(stdout: IO[str], line: str) -> None:
    """One line naming a pack's rule and log: a stranger's text, made safe to print."""
    from triage.render.sanitise import clean

    stdout.write(clean(line, name=True) + "\n")
