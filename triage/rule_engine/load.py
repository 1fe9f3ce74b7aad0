"""Rule packs: strict YAML in, validated and compiled rules out, every problem reported at once.

A pack is untrusted input. The loader refuses YAML tags that build objects, aliases
(so no alias bombs), duplicate keys and oversized files; the schema refuses unknown
keys; every expression and template is compiled at load time. Each problem is reported
as `file:line: rule 'id': what is wrong`, and all of them together.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from triage.errors import ExpressionError, RulePackError
from triage.rule_engine.expr import Expr, compile_expr
from triage.rule_engine.template import Template, compile_template

SCHEMA_VERSION = 1
MAX_PACK_BYTES = 1 << 20
MAX_RULES_PER_PACK = 500
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9\-]{1,63}$")
FLAG_PATTERN = re.compile(r"^--[a-z0-9][a-z0-9\-]*$")
ENV_PATTERN = re.compile(r"^[A-Z_][A-Z0-9_]*$")
# Names a rule's expressions may read; figures add their own names.
CONTEXT_NAMES = frozenset({"event", "failure", "oom", "facts", "attempt", "seen", "other_causes", "memory"})


# --- schema ---------------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, frozen=True, defer_build=True)


class When(_Model):
    """When a rule applies. `event` binds each event of that kind in turn as `event`."""

    event: str | None = None
    failed: bool = True
    phase: list[str] | None = None
    all: list[Any] = Field(default_factory=list)
    any: list[Any] = Field(default_factory=list)


class RemedySpec(_Model):
    text: str = ""
    flags: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, Any] = Field(default_factory=dict)
    when: Any = None

    @field_validator("flags")
    @classmethod
    def _flags(cls, v: dict[str, Any]) -> dict[str, Any]:
        for k in v:
            if not FLAG_PATTERN.match(str(k)):
                raise ValueError(f"flag {k!r} must look like --some-flag")
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, Any]) -> dict[str, Any]:
        for k in v:
            if not ENV_PATTERN.match(str(k)):
                raise ValueError(f"environment variable {k!r} must be UPPER_CASE")
        return v


class SentenceSpec(_Model):
    text: str
    when: Any = None


class RuleSpec(_Model):
    id: str
    cause: str
    title: str
    when: When = Field(default_factory=When)
    rank: Any = 50
    confidence: Any = 0.8
    figures: dict[str, Any] = Field(default_factory=dict)
    explanation: str | list[str | SentenceSpec | list[str | SentenceSpec]] = ""
    remedies: list[RemedySpec] = Field(default_factory=list)
    fallback: bool = False  # speaks only when no other rule explained the attempt
    fires_on: list[str] = Field(default_factory=list)
    quiet_on: list[str] = Field(default_factory=list)
    docs: str = ""

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not ID_PATTERN.match(v):
            raise ValueError("must be lower-case letters, digits and dashes (2-64 characters)")
        return v


class PackSpec(_Model):
    schema_version: int = Field(alias="schema")
    rules: list[Any]


# --- compiled rules -------------------------------------------------------------------


class Remedy(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)
    text: Template
    flags: dict[str, Template]
    env: dict[str, Template]
    when: Expr | None


class Rule(BaseModel):
    """A rule ready to run: every expression and template compiled."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)
    id: str
    cause: str
    title: str
    source: str
    event: str | None
    failed: bool
    phases: list[str] | None
    all: list[Expr]
    any: list[Expr]
    rank: Expr
    confidence: Expr
    figures: dict[str, Expr]
    explanation: list[list[tuple[Template, Expr | None]]]  # sentences, each a list of alternatives
    remedies: list[Remedy]
    fallback: bool
    fires_on: list[str]
    quiet_on: list[str]
    docs: str


def builtin_pack_paths() -> list[Path]:
    """The packs shipped with the tool (package data when installed, `rules/` in a checkout)."""
    try:
        root = resources.files("triage.rules_builtin")
        found = sorted(Path(str(p)) for p in root.iterdir() if str(p).endswith(".yaml"))
        if found:
            return [p for p in found if p.name != "taxonomy.yaml"]
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        pass
    here = Path(__file__).resolve().parents[2] / "rules"
    return sorted(p for p in here.glob("*.yaml") if p.name != "taxonomy.yaml")


def load_packs(paths: Iterable[Path], causes: set[str] | None = None) -> list[Rule]:
    """Load, validate and compile packs; raise one RulePackError listing every problem."""
    problems: list[str] = []
    rules: list[Rule] = []
    ids: dict[str, str] = {}
    for path in paths:
        for rule in _load_pack(Path(path), problems, causes):
            if rule.id in ids:
                problems.append(f"{rule.source}: rule {rule.id!r}: id already used at {ids[rule.id]}")
                continue
            ids[rule.id] = rule.source
            rules.append(rule)
    if problems:
        raise RulePackError(problems)
    return rules


def expand_pack_paths(paths: Iterable[str | Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.extend(sorted(x for x in path.glob("*.yaml") if x.name != "taxonomy.yaml"))
        else:
            out.append(path)
    return out


def _load_pack(path: Path, problems: list[str], causes: set[str] | None) -> list[Rule]:
    import yaml  # only when packs are read (compiled rules come from the cache on most runs)

    from triage.rule_engine.strict_yaml import StrictLoader

    try:
        text = read_pack_text(path)
    except ValueError as exc:  # too large, not a regular file, not UTF-8
        problems.append(f"{path}: {exc}")
        return []
    except OSError as exc:
        problems.append(f"{path}: cannot read rule pack: {exc.strerror or exc}")
        return []
    try:
        doc = yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a hardened SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problems.append(f"{where}: {getattr(exc, 'problem', None) or exc}")
        return []
    except (ValueError, TypeError, RecursionError) as exc:  # e.g. an integer of 5000 digits
        problems.append(f"{path}: cannot read rule pack: {str(exc).splitlines()[0][:200]}")
        return []
    if doc is None:
        problems.append(f"{path}: empty rule pack")
        return []
    try:
        pack = PackSpec.model_validate(doc)
    except ValidationError as exc:
        problems.extend(f"{path}:{getattr(doc, 'line', 1)}: {_pydantic_message(e)}" for e in exc.errors())
        return []
    if pack.schema_version != SCHEMA_VERSION:
        problems.append(f"{path}: schema {pack.schema_version} is not supported (this tool reads schema {SCHEMA_VERSION})")
        return []
    if len(pack.rules) > MAX_RULES_PER_PACK:
        problems.append(f"{path}: more than {MAX_RULES_PER_PACK} rules in one pack")
        return []
    return [r for r in (_compile_rule(path, raw, problems, causes) for raw in pack.rules) if r is not None]


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


def _compile_rule(path: Path, raw: Any, problems: list[str], causes: set[str] | None) -> Rule | None:
    line = getattr(raw, "line", 0)
    rid = raw.get("id", "?") if isinstance(raw, dict) else "?"
    where = f"{path}:{line}: rule {rid!r}"
    try:
        spec = RuleSpec.model_validate(raw)
    except ValidationError as exc:
        problems.extend(f"{where}: {_pydantic_message(e)}" for e in exc.errors())
        return None
    if causes is not None and spec.cause not in causes:
        problems.append(f"{where}: cause {spec.cause!r} is not in the taxonomy; must be one of: {', '.join(sorted(causes))}")
        return None
    before = len(problems)
    compiled = _compile_parts(spec, where, problems)
    if len(problems) > before:
        return None
    return Rule(id=spec.id, cause=spec.cause, title=spec.title, source=f"{path}:{line}", event=spec.when.event,
                failed=spec.when.failed, phases=spec.when.phase, fallback=spec.fallback, fires_on=spec.fires_on, quiet_on=spec.quiet_on,
                docs=spec.docs, **compiled)


def _compile_parts(spec: RuleSpec, where: str, problems: list[str]) -> dict[str, Any]:
    known = CONTEXT_NAMES | {str(n) for n in spec.figures}

    def names_known(label: str, exprs: list[Expr]) -> bool:
        """A name no context holds would fail on every log: say so now (`.inf` in YAML reads as `inf`)."""
        unknown = sorted({n for e in exprs for n in e.names()} - known)
        if unknown:
            problems.append(f"{where}: {label}: unknown name {unknown[0]!r}; must be one of: "
                            f"{', '.join(sorted(known))}")
        return not unknown

    def expr(label: str, source: Any) -> Expr | None:
        try:
            compiled = compile_expr(source)
        except ExpressionError as exc:
            problems.append(f"{where}: {label}: {exc}")
            return None
        return compiled if names_known(label, [compiled]) else None

    def tmpl(label: str, source: Any) -> Template | None:
        try:
            compiled = compile_template(source)
        except ExpressionError as exc:
            problems.append(f"{where}: {label}: {exc}")
            return None
        parts = [part[0] for part in compiled.parts if isinstance(part, tuple)]
        return compiled if names_known(label, parts) else None

    figures = {}
    for name, source in spec.figures.items():
        if name in CONTEXT_NAMES or not re.match(r"^[a-z_][a-z0-9_]*$", str(name)):
            problems.append(f"{where}: figures.{name}: a figure name must be snake_case and not one of "
                            f"{', '.join(sorted(CONTEXT_NAMES))}")
            continue
        figures[name] = expr(f"figures.{name}", source)
    explanation = spec.explanation if isinstance(spec.explanation, list) else [spec.explanation]
    remedies = []
    for i, r in enumerate(spec.remedies):
        remedies.append(Remedy(
            text=tmpl(f"remedies[{i}].text", r.text) or compile_template(""),
            flags={k: tmpl(f"remedies[{i}].flags.{k}", v) or compile_template("") for k, v in r.flags.items()},
            env={k: tmpl(f"remedies[{i}].env.{k}", v) or compile_template("") for k, v in r.env.items()},
            when=expr(f"remedies[{i}].when", r.when) if r.when is not None else None,
        ))
    return {
        "all": [e for i, s in enumerate(spec.when.all) if (e := expr(f"when.all[{i}]", s))],
        "any": [e for i, s in enumerate(spec.when.any) if (e := expr(f"when.any[{i}]", s))],
        "rank": expr("rank", spec.rank) or compile_expr("0"),
        "confidence": expr("confidence", spec.confidence) or compile_expr("0"),
        "figures": figures,
        "explanation": [[_sentence(i, alt, tmpl, expr) for alt in (s if isinstance(s, list) else [s])]
                        for i, s in enumerate(explanation) if s],
        "remedies": remedies,
    }


def _sentence(i: int, spec: Any, tmpl, expr) -> tuple[Template, Expr | None]:
    if isinstance(spec, SentenceSpec):
        return (tmpl(f"explanation[{i}].text", spec.text) or compile_template(""),
                expr(f"explanation[{i}].when", spec.when) if spec.when is not None else None)
    return tmpl(f"explanation[{i}]", spec) or compile_template(""), None


def _pydantic_message(err: dict) -> str:
    loc = ".".join(str(x) for x in err.get("loc", ()))
    return f"{loc}: {err.get('msg', 'invalid')}" if loc else str(err.get("msg", "invalid"))


def load_taxonomy(path: Path | None = None) -> dict[str, dict]:
    """Cause ids and titles (rules/taxonomy.yaml, a copy of the shared taxonomy)."""
    if path is None:
        candidates = [Path(str(resources.files("triage.rules_builtin") / "taxonomy.yaml"))] if _has_pkg() else []
        candidates.append(Path(__file__).resolve().parents[2] / "rules" / "taxonomy.yaml")
        path = next((p for p in candidates if p.exists()), candidates[-1])
    import yaml

    from triage.rule_engine.strict_yaml import StrictLoader

    doc = yaml.load(path.read_text(encoding="utf-8"), Loader=StrictLoader)  # noqa: S506
    return dict(doc["causes"])


def _has_pkg() -> bool:
    try:
        resources.files("triage.rules_builtin")
        return True
    except ModuleNotFoundError:
        return False


_RULES_CACHE: dict[tuple, list[Rule]] = {}


def load_rules(extra: Iterable[str] = ()) -> list[Rule]:
    key = tuple(extra)
    if key not in _RULES_CACHE:
        _RULES_CACHE[key] = _load_rules_cached([*builtin_pack_paths(), *expand_pack_paths(extra)])
    return _RULES_CACHE[key]


def _load_rules_cached(paths: list[Path]) -> list[Rule]:
    """Compiled rules from the on-disk cache when their packs are unchanged (YAML and
    expression compiling cost more than a whole small log)."""
    from triage import cache

    sources = [*paths, *{p.parent / "taxonomy.yaml" for p in paths[:1]}]
    key = cache.stamp(sources, "rules")
    name = f"rules-{key}.pickle" if key else None
    rules = cache.load(name) if name else None
    if isinstance(rules, list) and all(isinstance(r, Rule) for r in rules):
        return rules
    rules = load_packs(paths, set(load_taxonomy()))
    if name:
        cache.save(name, rules)
    return rules
