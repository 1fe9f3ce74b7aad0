"""Rule packs: found, read as strict YAML, validated and compiled; every problem reported at once.

A pack is untrusted input. The loader refuses YAML tags that build objects, aliases
(so no alias bombs), duplicate keys and oversized files; the schema (pack_schema.py) refuses
unknown keys; every expression and template is compiled at load time. Each problem is a
located `Problem` (path, line, rule id, field, message), and all of them are reported together.

Most runs never get here past `load_rules`: the compiled rules come from the on-disk cache,
and YAML, pydantic and the schema are imported only on a cache miss or by `rules check`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from triage.errors import ExpressionError, Problem, RulePackError
from triage.rule_engine.compiled import RemedyTemplate, Rule
from triage.rule_engine.expr import Expr, compile_expr
from triage.rule_engine.op_budget import ATTEMPT_OPS, PLANNED_EVENTS, over_rule_budget, planned_cost
from triage.rule_engine.template import Template, compile_template

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "MAX_PACK_BYTES",
    "Problem",
    "RemedyTemplate",
    "Rule",
    "builtin_dir",
    "builtin_pack_paths",
    "expand_pack_paths",
    "load_packs",
    "load_rules",
    "load_taxonomy",
    "read_pack_text",
]

MAX_PACK_BYTES = 1 << 20
MAX_RULES_PER_PACK = 500
TAXONOMY = "taxonomy.yaml"
# Part of the cache key: another shape of Rule (msgspec Structs, pack figures), or rules cached
# before a load-time check (the cost budget) existed, is never read.
RULES_FORMAT = "structs-2-pack-figures-bounded"
# Names a rule's expressions may read; figures add their own names.
CONTEXT_NAMES = frozenset({"event", "failure", "oom", "facts", "attempt", "seen", "other_causes", "memory"})
# Read only by fallback rules: the error catalogue is consulted when no other rule explained the attempt.
FALLBACK_NAMES = frozenset({"catalogue"})
# Names a pack-level figure may read besides the pack's other figures: the startup attempt's,
# the same for every rule of the pack (no `event`, bound per rule; no `other_causes`).
PACK_FIGURE_NAMES = CONTEXT_NAMES - {"event", "other_causes"}


# --- discovery: the one place that knows where packs live ----------------------------------


def builtin_dir() -> Path:
    """The shipped packs' folder: `triage/rules_builtin/` in an installed copy (package data),
    the checkout's top-level `rules/` otherwise."""
    from pathlib import Path

    return Path(_builtin_folder())


def _builtin_folder() -> str:
    """`builtin_dir()` as a string: a plain run reads its packs' stamps without pathlib (~2 ms
    of imports)."""
    here = os.path.realpath(__file__)
    installed = os.path.join(os.path.dirname(os.path.dirname(here)), "rules_builtin")
    if os.path.isfile(os.path.join(installed, TAXONOMY)):
        return installed
    return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(here))), "rules")


def packs_in(folder: Path) -> list[Path]:
    """The packs of a folder: every `*.yaml` but the taxonomy, in name order."""
    return sorted(p for p in folder.glob("*.yaml") if p.name != TAXONOMY)


def builtin_pack_paths() -> list[Path]:
    """The packs shipped with the tool."""
    return packs_in(builtin_dir())


def _builtin_pack_files() -> list[str]:
    """`builtin_pack_paths()` as strings, listed without pathlib (what a plain run needs)."""
    folder = _builtin_folder()
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [os.path.join(folder, n) for n in sorted(names) if n.endswith(".yaml") and n != TAXONOMY]


def expand_pack_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Extra packs as given on the command line: a folder stands for its packs."""
    from pathlib import Path

    out: list[Path] = []
    for p in paths:
        path = Path(p)
        out.extend(packs_in(path) if os.path.isdir(path) else [path])  # an unusable name: read as a file, one problem
    return out


# --- reading -------------------------------------------------------------------------------


def read_pack_text(path: Path) -> str:
    """A pack's text, read with a hard cap: at most MAX_PACK_BYTES + 1 bytes are ever read.

    `st_size` is never trusted (0 for `/dev/zero`, which would be read forever); a FIFO, a
    device or a socket is refused before a read can block on it.
    """
    from triage.ingest.read import file_kind

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        kind = file_kind(os.fstat(fd).st_mode)
        if kind != "regular file":
            raise ValueError(f"a rule pack must be a regular file, not a {kind}")
        os.set_blocking(fd, True)
        data = fh.read(MAX_PACK_BYTES + 1)
    if len(data) > MAX_PACK_BYTES:
        raise ValueError(f"rule pack larger than {MAX_PACK_BYTES >> 10} KiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"cannot read rule pack: not UTF-8 text (byte {exc.start})") from None


def _field_label(path: tuple) -> str:
    """`("remedies", 0, "flags")` -> `remedies[0].flags`."""
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out


class _Pack:
    """One pack being loaded: its path, and the problems found in it so far."""

    def __init__(self, path: Path, causes: set[str] | None, ids: dict[str, str]) -> None:
        self.path, self.causes, self.ids = path, causes, ids  # ids: rule id -> where it was first seen
        self.problems: list[Problem] = []

    def problem(self, message: str, line: int | None = None, rule: str | None = None, field: str | None = None) -> None:
        self.problems.append(Problem(path=str(self.path), line=line, rule=rule, field=field, message=message))

    @staticmethod
    def line(node: Any, path: tuple) -> int:
        """The pack line of `path` inside `node` (0: not known)."""
        from triage.rule_engine.strict_yaml import line_of  # loaded with the YAML (see read)

        return line_of(node, path)

    def read(self) -> Any:
        """The pack's YAML document, or None (and a problem) when it cannot be read."""
        import yaml  # only when packs are read (compiled rules come from the cache on most runs)

        from triage.rule_engine.strict_yaml import StrictLoader

        try:
            text = read_pack_text(self.path)
        except ValueError as exc:  # too large, not a regular file, not UTF-8
            self.problem(str(exc))
            return None
        except OSError as exc:
            self.problem(f"cannot read rule pack: {exc.strerror or exc}")
            return None
        try:
            doc = yaml.load(text, Loader=StrictLoader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            self.problem(str(getattr(exc, "problem", None) or exc), line=mark.line + 1 if mark else None)
            return None
        except (ValueError, TypeError, RecursionError) as exc:  # e.g. an integer of 5000 digits
            self.problem(f"cannot read rule pack: {str(exc).splitlines()[0][:200]}")
            return None
        if doc is None:
            self.problem("empty rule pack")
        return doc

    def rules(self) -> list[Rule]:
        """Every rule of the pack that compiles; the others leave their problems."""
        from triage.rule_engine import pack_schema as schema  # pydantic: only when a pack is actually read

        doc = self.read()
        if doc is None:
            return []
        pack, errors = schema.validate(schema.PackSpec, doc)
        for loc, msg in errors:
            self.problem(msg, line=self.line(doc, loc) or 1, field=_field_label(loc) or None)
        if pack is None:
            return []
        if pack.schema_version != schema.PACK_SCHEMA_VERSION:
            self.problem(
                f"schema {pack.schema_version} is not supported (this tool reads schema {schema.PACK_SCHEMA_VERSION})",
                line=self.line(doc, ("schema",)),
            )
            return []
        if len(pack.rules) > MAX_RULES_PER_PACK:
            self.problem(f"more than {MAX_RULES_PER_PACK} rules in one pack", line=self.line(doc, ("rules",)))
            return []
        figures = self._figures(pack.figures, doc)
        if figures is None:
            return []
        rules = [r for raw in pack.rules if (r := self._rule(raw, figures)) is not None]
        return [r for r in rules if self._affordable(r, doc)]

    def _figures(self, given: dict[Any, Any], doc: Any) -> dict[str, Expr] | None:
        """The pack's named figures, compiled and checked (pack_figures.py); None after a
        problem: a rule reading a broken figure would only add noise."""
        from triage.rule_engine.pack_figures import compile_figures  # only when a pack is read

        figures, problems = compile_figures(given, CONTEXT_NAMES | FALLBACK_NAMES, PACK_FIGURE_NAMES)
        for at, message in problems:
            self.problem(message, line=self.line(doc, at) or None, field=_field_label(at))
        return None if problems else figures

    def _affordable(self, rule: Rule, doc: Any) -> bool:
        """A rule whose planned cost is over its evaluation budget is refused here, not mid-log."""
        why = over_rule_budget(rule)
        if why is not None:
            self.problem(why, line=int(rule.source.rsplit(":", 1)[1]) or None, rule=rule.id, field="when")
        return why is None

    def _rule(self, raw: Any, figures: dict[str, Expr]) -> Rule | None:
        from triage.rule_engine import pack_schema as schema

        rid = str(raw.get("id", "?")) if isinstance(raw, dict) else "?"
        line = getattr(raw, "line", 0)
        spec, errors = schema.validate(schema.RuleSpec, raw)
        for loc, msg in errors:
            self.problem(msg, line=self.line(raw, loc) or line, rule=rid, field=_field_label(loc) or None)
        if spec is None:
            return None
        if self.causes is not None and spec.cause not in self.causes:
            self.problem(
                f"{spec.cause!r} is not in the taxonomy; must be one of: {', '.join(sorted(self.causes))}",
                line=self.line(raw, ("cause",)),
                rule=rid,
                field="cause",
            )
            return None
        rule = _RuleCompiler(self, raw, spec, figures).compile()
        if rule is not None and rule.id in self.ids:
            self.problem(f"already used at {self.ids[rule.id]}", line=self.line(raw, ("id",)), rule=rid, field="id")
            return None
        if rule is not None:
            self.ids[rule.id] = rule.source
        return rule


class _RuleCompiler:
    """Compiles one validated rule; each problem is recorded at the line of its field."""

    def __init__(self, pack: _Pack, raw: Any, spec: Any, pack_figures: dict[str, Expr]) -> None:
        self.pack, self.raw, self.spec, self.pack_figures = pack, raw, spec, pack_figures
        own = {str(n) for n in spec.figures}
        self.known = CONTEXT_NAMES | (FALLBACK_NAMES if spec.fallback else set()) | own | set(pack_figures)
        self.failed = False

    def problem(self, path: tuple, message: str) -> None:
        self.failed = True
        self.pack.problem(
            message,
            line=self.pack.line(self.raw, path) or getattr(self.raw, "line", 0),
            rule=self.spec.id,
            field=_field_label(path),
        )

    def _names_known(self, path: tuple, exprs: list[Expr]) -> bool:
        """A name no context holds would fail on every log: say so now (`.inf` in YAML reads as `inf`)."""
        unknown = sorted({n for e in exprs for n in e.names()} - self.known)
        if unknown and unknown[0] in FALLBACK_NAMES:
            self.problem(
                path,
                f"{unknown[0]!r} is read only by a fallback rule (fallback: true): it is looked up "
                "when no other rule explained the failure",
            )
        elif unknown:
            self.problem(path, f"unknown name {unknown[0]!r}; must be one of: {', '.join(sorted(self.known))}")
        return not unknown

    def expr(self, path: tuple, source: Any) -> Expr:
        """The compiled expression (a placeholder `0` when it has a problem: the rule is dropped)."""
        try:
            compiled = compile_expr(source)
        except ExpressionError as exc:
            self.problem(path, str(exc))
            return compile_expr("0")
        return compiled if self._names_known(path, [compiled]) else compile_expr("0")

    def tmpl(self, path: tuple, source: Any) -> Template:
        """The compiled template (an empty one when it has a problem: the rule is dropped)."""
        try:
            compiled = compile_template(source)
        except ExpressionError as exc:
            self.problem(path, str(exc))
            return compile_template("")
        parts = [part[0] for part in compiled.parts if isinstance(part, tuple)]
        return compiled if self._names_known(path, parts) else compile_template("")

    def compile(self) -> Rule | None:
        from triage.rule_engine.pack_figures import FIGURE_NAME

        spec = self.spec
        figures = {}
        for name, source in spec.figures.items():
            if name in CONTEXT_NAMES | FALLBACK_NAMES or not FIGURE_NAME.match(str(name)):
                self.problem(
                    ("figures", name),
                    f"a figure name must be snake_case and not one of {', '.join(sorted(CONTEXT_NAMES))}",
                )
                continue
            if name in self.pack_figures:
                self.problem(("figures", name), f"{name!r} is a figure of the pack: give the rule's own another name")
                continue
            figures[name] = self.expr(("figures", name), source)
        remedies = [self._remedy(i, r) for i, r in enumerate(spec.remedies)]
        when_all = [self.expr(("when", "all", i), s) for i, s in enumerate(spec.when.all)]
        when_any = [self.expr(("when", "any", i), s) for i, s in enumerate(spec.when.any)]
        rank, confidence = self.expr(("rank",), spec.rank), self.expr(("confidence",), spec.confidence)
        explanation = self._explanation()
        if self.failed:
            return None
        return Rule(
            id=spec.id,
            cause=spec.cause,
            title=spec.title,
            source=f"{self.pack.path}:{getattr(self.raw, 'line', 0)}",
            event=spec.when.event,
            failed=spec.when.failed,
            phases=spec.when.phase,
            all=when_all,
            any=when_any,
            rank=rank,
            confidence=confidence,
            figures=figures,
            explanation=explanation,
            remedies=remedies,
            fallback=spec.fallback,
            fires_on=spec.fires_on,
            quiet_on=spec.quiet_on,
            docs=spec.docs,
            pack_figures=self.pack_figures,
        )

    def _remedy(self, i: int, r: Any) -> RemedyTemplate:
        at = ("remedies", i)
        return RemedyTemplate(
            text=self.tmpl((*at, "text"), r.text),
            flags={k: self.tmpl((*at, "flags", k), v) for k, v in r.flags.items()},
            env={k: self.tmpl((*at, "env", k), v) for k, v in r.env.items()},
            when=self.expr((*at, "when"), r.when) if r.when is not None else None,
        )

    def _explanation(self) -> list[list[tuple[Template, Expr | None]]]:
        """Sentences, each a list of alternatives (the first whose condition holds is said)."""
        given = self.spec.explanation
        if not isinstance(given, list):
            return [[self._sentence(("explanation",), given)]] if given else []
        out = []
        for i, s in enumerate(given):
            if s:
                alternatives = [((i, j), alt) for j, alt in enumerate(s)] if isinstance(s, list) else [((i,), s)]
                out.append([self._sentence(("explanation", *at), alt) for at, alt in alternatives])
        return out

    def _sentence(self, path: tuple, spec: Any) -> tuple[Template, Expr | None]:
        if isinstance(spec, str):
            return self.tmpl(path, spec), None
        return (
            self.tmpl((*path, "text"), spec.text),
            self.expr((*path, "when"), spec.when) if spec.when is not None else None,
        )


def load_packs(paths: Iterable[str | Path], causes: set[str] | None = None) -> list[Rule]:
    """Load, validate and compile packs; raise one RulePackError carrying every problem."""
    from pathlib import Path

    problems: list[Problem] = []
    rules: list[Rule] = []
    ids: dict[str, str] = {}
    total = 0
    for path in paths:
        pack = _Pack(Path(path), causes, ids)
        loaded = pack.rules()
        rules.extend(loaded)
        problems.extend(pack.problems)
        cost = sum(planned_cost(r) for r in loaded)
        if total + cost > ATTEMPT_OPS and loaded:
            worst = max(loaded, key=planned_cost)
            problems.append(
                Problem(
                    path=str(path),
                    message=(
                        f"the pack's rules cost {cost:,} operations on one startup attempt "
                        f"(with {PLANNED_EVENTS:,} events "
                        f"of each bound kind), the rules before it {total:,}: over the evaluation budget of "
                        f"{ATTEMPT_OPS:,} for all rules together; the costliest is {worst.id!r} "
                        f"({planned_cost(worst):,}, {worst.source})"
                    ),
                )
            )
        total += cost
    if problems:
        raise RulePackError(problems)
    return rules


def load_taxonomy(path: Path | None = None) -> dict[str, dict]:
    """Cause ids and titles (rules/taxonomy.yaml, a copy of the shared taxonomy)."""
    import yaml

    from triage.rule_engine.strict_yaml import StrictLoader

    path = path or builtin_dir() / TAXONOMY
    doc = yaml.load(path.read_text(encoding="utf-8"), Loader=StrictLoader)
    return dict(doc["causes"])


_RULES_CACHE: dict[tuple, list[Rule]] = {}


def load_rules(extra: Iterable[str] = ()) -> list[Rule]:
    """The built-in rules and those of `extra` packs or folders, compiled once per process."""
    key = tuple(extra)
    if key not in _RULES_CACHE:
        extra_paths = expand_pack_paths(key) if key else []
        _RULES_CACHE[key] = _load_rules_cached([*_builtin_pack_files(), *extra_paths])
    return _RULES_CACHE[key]


def _load_rules_cached(paths: list[str | Path]) -> list[Rule]:
    """Compiled rules from the on-disk cache when their packs are unchanged (YAML and
    expression compiling cost more than a whole small log)."""
    from triage import cache

    key = cache.stamp([*paths, os.path.join(_builtin_folder(), TAXONOMY)], "rules", RULES_FORMAT)
    name = f"rules-{key}.pickle" if key else None
    rules = cache.load(name) if name else None
    if isinstance(rules, list) and all(isinstance(r, Rule) for r in rules):
        return rules
    rules = load_packs(paths, set(load_taxonomy()))
    if name:
        cache.save(name, rules)
    return rules
