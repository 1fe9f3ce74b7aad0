"""Message templates out of Python's AST: the literal text and the formatted fields.

A template is a list of parts: a ``str`` is literal text, a one-item ``list`` ``[expr]`` is a
formatted field (the source of the expression that fills it).  Understood: string constants,
f-strings, ``"..." % args``, ``"...".format(...)``, ``+`` concatenation of those, and a name
assigned one of them earlier in the same function (vLLM's ``msg = f"..."; raise X(msg)``).
Anything else (``str(e)``, a call) gives no template: its text is not in the source.
"""

from __future__ import annotations

import ast
import re
import string

Part = str | list  # literal text, or [expression source]

_PERCENT = re.compile(r"%(?:\((\w+)\))?[-#0 +]*(?:\d+|\*)?(?:\.\d+)?[hlL]?([diouxXeEfFgGcrsa%])")


def template_of(node: ast.AST | None, local: dict[str, ast.AST] | None = None, depth: int = 0) -> list[Part] | None:
    """The template of a message expression, or None where its text is not in the source."""
    if node is None or depth > 4:
        return None
    local = local or {}
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return _fstring(node, local, depth)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = template_of(node.left, local, depth + 1)
        right = template_of(node.right, local, depth + 1)
        if left is None and right is None:
            return None
        return (left or [[_src(node.left)]]) + (right or [[_src(node.right)]])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        fmt = template_of(node.left, local, depth + 1)
        if fmt is None or len(fmt) != 1 or not isinstance(fmt[0], str):
            return None
        args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
        return percent_template(fmt[0], [_src(a) for a in args])
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
        and isinstance(node.func.value.value, str)
    ):
        return _format_template(node.func.value.value, node)
    if isinstance(node, ast.Name) and node.id in local:
        return template_of(local[node.id], {}, depth + 1)
    return None


def percent_template(fmt: str, args: list[str]) -> list[Part]:
    """``"a %s b %d" % (x, y)`` (and logger's lazy form) as parts."""
    parts: list[Part] = []
    pos = 0
    argi = 0
    for m in _PERCENT.finditer(fmt):
        parts.append(fmt[pos : m.start()])
        if m.group(2) == "%":
            parts.append("%")
        else:
            name = m.group(1) or (args[argi] if argi < len(args) else "arg")
            argi += 0 if m.group(1) else 1
            parts.append([name])
        pos = m.end()
    parts.append(fmt[pos:])
    return _joined(parts)


def _fstring(node: ast.JoinedStr, local: dict[str, ast.AST], depth: int) -> list[Part]:
    """An f-string; a field that is a local message (f"{msg} Try ...") is spliced in."""
    parts: list[Part] = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value))
        elif isinstance(value, ast.FormattedValue):
            inner = None
            if isinstance(value.value, ast.Name) and value.value.id in local and value.format_spec is None:
                inner = template_of(local[value.value.id], {}, depth + 1)
            parts.extend(inner if inner else [[_src(value.value)]])
    return _joined(parts)


def _format_template(fmt: str, call: ast.Call) -> list[Part] | None:
    keywords = {k.arg: _src(k.value) for k in call.keywords if k.arg}
    positional = [_src(a) for a in call.args]
    parts: list[Part] = []
    auto = 0
    try:
        parsed = list(string.Formatter().parse(fmt))
    except ValueError:
        return None
    for literal, field, _spec, _conv in parsed:
        parts.append(literal)
        if field is None:
            continue
        if field == "":
            name = positional[auto] if auto < len(positional) else "arg"
            auto += 1
        elif field.isdigit():
            name = positional[int(field)] if int(field) < len(positional) else "arg"
        else:
            name = keywords.get(field.split(".")[0].split("[")[0], field)
        parts.append([name])
    return _joined(parts)


def _joined(parts: list[Part]) -> list[Part]:
    """Adjacent literals merged, empty ones dropped."""
    out: list[Part] = []
    for p in parts:
        if isinstance(p, str):
            if not p:
                continue
            if out and isinstance(out[-1], str):
                out[-1] += p
                continue
        out.append(p)
    return out


def _src(node: ast.AST) -> str:
    try:
        return ast.unparse(node)[:80]
    except Exception:  # noqa: BLE001 - an odd node is just an unnamed field
        return "arg"


def render(parts: list[Part]) -> str:
    """The template as one string, fields as ``{expr}``: the dedup key and the human view."""
    return "".join(p if isinstance(p, str) else "{" + p[0] + "}" for p in parts)
