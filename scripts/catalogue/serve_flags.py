"""The flags `vllm serve` takes, read from vLLM's own sources, with the releases that have each.

Maintainer tooling, never run by users or tests.  Stage 1 is ``fetch.py`` (the same cache the
error catalogue uses: each release's ``.py`` sources, the wheel deleted at once).  This stage
walks, with ``ast``, what builds the serve parser: ``make_arg_parser`` (vllm/entrypoints/openai/
cli_args.py, later vllm/entrypoints/common/cli_args.py), the serve subcommand's
``subparser_init`` (vllm/entrypoints/cli/serve.py), and every ``Cls.add_cli_args(parser)`` they
reach (EngineArgs, AsyncEngineArgs, FrontendArgs, ...).  A literal ``"--flag"`` given to
``add_argument`` is a flag; a loop ``for key, v in get_kwargs(Cls).items(): add_argument(
f"--{key...}")`` makes one flag per dataclass field of ``Cls`` (and its bases).  The result is
written, sorted, to triage/plan/vllm_serve_flags.txt as ``name first-release last-release``.

    python scripts/catalogue/fetch.py --cache /tmp/catsrc      # network, once
    python scripts/catalogue/serve_flags.py --cache /tmp/catsrc
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

from fetch import VLLM_RELEASES, fetch

HERE = Path(__file__).resolve().parent
OUT = HERE.parent.parent / "triage" / "plan" / "vllm_serve_flags.txt"
# Where the serve parser is built, by release: (file, function or Class.method).
# The serve subcommand's own parser setup; before `vllm/entrypoints/cli/` (0.6) it was in
# `vllm/scripts.py`'s main, beside the other subcommands'.
ENTRY_POINTS = (
    ("vllm/entrypoints/cli/serve.py", "*.subparser_init", None),
    ("vllm/scripts.py", "main", "serve_parser"),
)
_CLASS = re.compile(r"^class (\w+)\b", re.MULTILINE)


class Release:
    """One release's sources: a class index and the parsed modules, read on demand."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.classes: dict[str, list[Path]] = {}
        for path in sorted((root / "vllm").rglob("*.py")):
            if "third_party" in path.parts or "tests" in path.parts:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            for name in _CLASS.findall(text):
                self.classes.setdefault(name, []).append(path)
        self._trees: dict[Path, ast.Module] = {}
        self.unresolved: list[str] = []

    def tree(self, path: Path) -> ast.Module:
        if path not in self._trees:
            self._trees[path] = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        return self._trees[path]

    def find_class(self, name: str, near: Path | None = None) -> ast.ClassDef | None:
        """The class called `name`; where several modules define one, prefer vllm/config and engine."""
        paths = sorted(
            self.classes.get(name, []),
            key=lambda p: (
                p != near,
                "config" not in str(p),
                "engine" not in str(p),
                str(p),
            ),
        )
        for path in paths:
            for node in self.tree(path).body:
                if isinstance(node, ast.ClassDef) and node.name == name:
                    node.path = path  # type: ignore[attr-defined]
                    return node
        self.unresolved.append(f"class {name}")
        return None

    def method(self, cls: ast.ClassDef, name: str) -> tuple[ast.FunctionDef, ast.ClassDef] | None:
        """`cls.name`, looked up through the bases as Python would (first base first)."""
        for node in cls.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return node, cls
        for base in cls.bases:
            parent = self.find_class(base.id, cls.path) if isinstance(base, ast.Name) else None
            if parent is not None and (found := self.method(parent, name)) is not None:
                return found
        return None

    def fields(self, cls: ast.ClassDef) -> set[str]:
        """The dataclass fields of `cls` and its bases (annotated names, no ClassVar, no _private)."""
        names: set[str] = set()
        for base in cls.bases:
            if isinstance(base, ast.Name) and (parent := self.find_class(base.id, cls.path)) is not None:
                names |= self.fields(parent)
        for node in cls.body:
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and not node.target.id.startswith("_")
                and "ClassVar" not in ast.unparse(node.annotation)
            ):
                names.add(node.target.id)
        return names


def _kwargs_class(func: ast.FunctionDef, var: str, owner: ast.ClassDef | None, rel: Release) -> ast.ClassDef | None:
    """The class `C` of `var = get_kwargs(C)` in `func` (`cls` is the class the method runs on)."""
    for node in ast.walk(func):
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == var for t in node.targets)
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", "") == "get_kwargs"
            and node.value.args
            and isinstance(node.value.args[0], ast.Name)
        ):
            name = node.value.args[0].id
            return owner if name == "cls" else rel.find_class(name, getattr(owner, "path", None))
    return None


def walk(
    func: ast.FunctionDef,
    owner: ast.ClassDef | None,
    path: Path,
    rel: Release,
    flags: set[str],
    seen: set,
    receiver: str | None = None,
) -> None:
    """Add the flags `func` (in module `path`) gives its parser, following what it calls with it.

    Followed: `X.add_cli_args(parser)` (through X's bases; `cls` stays bound to X) and plain
    functions called with a `*parser*` variable (make_arg_parser).  `receiver`, when set, keeps
    only `receiver.add_argument(...)` (the old `vllm/scripts.py` builds every subcommand in one
    function)."""
    if (id(func), id(owner)) in seen:
        return
    seen.add((id(func), id(owner)))
    for node in ast.walk(func):
        if isinstance(node, ast.For):
            _loop_fields(node, func, owner, rel, flags)
        if _is_add_argument(node):
            if receiver is None or ast.unparse(node.func.value) == receiver:
                flags |= {
                    a.value[2:]
                    for a in node.args
                    if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--")
                }
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_cli_args":
            _follow_method(node, owner, path, rel, flags, seen)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and any(isinstance(a, ast.Name) and "parser" in a.id and receiver in (None, a.id) for a in node.args)
        ):
            found = _function(node.func.id, path, rel)
            if found is not None:
                walk(found[0], None, found[1], rel, flags, seen)


def _loop_fields(
    node: ast.For,
    func: ast.FunctionDef,
    owner: ast.ClassDef | None,
    rel: Release,
    flags: set[str],
) -> None:
    """`for key, v in kw.items(): add_argument(f"--{key...}")`: one flag per field of kw's class."""
    it = node.iter
    if not (
        isinstance(it, ast.Call) and getattr(it.func, "attr", "") == "items" and isinstance(it.func.value, ast.Name)
    ):
        return
    if not any(isinstance(a, ast.JoinedStr) for call in ast.walk(node) if _is_add_argument(call) for a in call.args):
        return
    cls = _kwargs_class(func, it.func.value.id, owner, rel)
    if cls is None:
        rel.unresolved.append(f"loop over {it.func.value.id} in {func.name}")
    else:
        flags |= {name.replace("_", "-") for name in rel.fields(cls)}


def _follow_method(
    node: ast.Call,
    owner: ast.ClassDef | None,
    path: Path,
    rel: Release,
    flags: set[str],
    seen: set,
) -> None:
    target = node.func.value  # type: ignore[attr-defined]
    cls: ast.ClassDef | None = None
    if isinstance(target, ast.Name):
        cls = owner if target.id == "cls" else rel.find_class(target.id, path)
    elif isinstance(target, ast.Call) and getattr(target.func, "id", "") == "super" and owner is not None:
        base = owner.bases[0] if owner.bases else None
        parent = rel.find_class(base.id, owner.path) if isinstance(base, ast.Name) else None
        found = rel.method(parent, "add_cli_args") if parent is not None else None
        if found is not None:
            walk(found[0], owner, found[1].path, rel, flags, seen)
        return
    if cls is None:
        rel.unresolved.append(ast.unparse(node.func))
        return
    found = rel.method(cls, "add_cli_args")
    if found is not None:
        walk(found[0], cls, found[1].path, rel, flags, seen)


def _function(name: str, path: Path, rel: Release) -> tuple[ast.FunctionDef, Path] | None:
    """The top-level function `name` as module `path` sees it: its own, or imported from vllm."""
    for node in ast.walk(rel.tree(path)):
        if isinstance(node, ast.FunctionDef) and node.name == name and node.col_offset == 0:
            return node, path
        if (
            isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("vllm")
            and any(alias.name == name and alias.asname in (None, name) for alias in node.names)
        ):
            base = rel.root / node.module.replace(".", "/")
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.exists() and candidate != path:
                    return _function(name, candidate, rel)
    return None


def _is_add_argument(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"


def release_flags(root: Path) -> tuple[set[str], list[str]]:
    """The serve flags of one release's sources, and what could not be followed."""
    rel, flags, seen = Release(root), set(), set()
    for file, name, receiver in ENTRY_POINTS:
        path = root / file
        if not path.exists():
            continue
        for node in ast.walk(rel.tree(path)):
            if isinstance(node, ast.ClassDef) and name.startswith("*."):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == name[2:]:
                        node.path = path  # type: ignore[attr-defined]
                        walk(item, node, path, rel, flags, seen, receiver)
            elif isinstance(node, ast.FunctionDef) and node.name == name and node.col_offset == 0:
                walk(node, None, path, rel, flags, seen, receiver)
    return flags, rel.unresolved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--cache",
        type=Path,
        required=True,
        help="the fetch.py cache (fetched if missing)",
    )
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    span: dict[str, list[str]] = {}
    for version in VLLM_RELEASES:
        flags, unresolved = release_flags(fetch("vllm", version, args.cache))
        if len(flags) < 50 or unresolved:
            print(
                f"{version}: {len(flags)} flags; unresolved: {unresolved}",
                file=sys.stderr,
            )
        print(f"{version}: {len(flags)} flags", flush=True)
        for name in flags:
            span.setdefault(name, [version, version])[1] = version
    header = [
        "# The flags `vllm serve` takes, one a line: NAME FIRST-RELEASE LAST-RELEASE (no leading dashes).",
        "# Generated by scripts/catalogue/serve_flags.py from vLLM's own sources (the parser built by",
        "# make_arg_parser and the add_cli_args it reaches, read with ast); do not edit by hand.",
        f"# Releases read: {' '.join(VLLM_RELEASES)}.",
        "# FIRST/LAST are the first and last of those releases that have the flag.",
    ]
    lines = [f"{name} {first} {last}" for name, (first, last) in sorted(span.items())]
    args.out.write_text("\n".join(header + lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} flags -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
