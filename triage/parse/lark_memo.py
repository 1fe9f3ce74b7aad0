"""The generated parsers' memo, made into lark's objects.

`scripts/gen_parsers.py` writes each grammar's memo (its terminals and rules, which the parse
tables refer to by number) as tuples, `(class name, field, ...)` in the class's
`__serialize_fields__` order. `made` turns them into the objects lark's `Serialize.deserialize`
would build (the object, its fields set, its `_deserialize` hook run) without lark's generic
walk: ~2.5 ms instead of ~4.5 ms on the log grammar's ~3000 objects. Both generated parsers
import this one module; lark's loader takes the made objects as they are.
"""

from __future__ import annotations

from typing import Any

from triage.parse.lark_runtime import Lark, NonTerminal, PatternRE, PatternStr, Rule, RuleOptions, Terminal, TerminalDef

# The classes a memo may hold (the generator refuses a memo with any other).
MEMO_CLASSES = (NonTerminal, PatternRE, PatternStr, Rule, RuleOptions, Terminal, TerminalDef)
_CLASSES = {c.__name__: (c, c.__serialize_fields__, hasattr(c, "_deserialize")) for c in MEMO_CLASSES}


def made(value: Any) -> Any:
    """The object a memo tuple stands for; lists and dicts made member by member; lark's other
    tuples (`empty_indices`, which never start with a string) and plain values as they are."""
    if type(value) is tuple and value and type(value[0]) is str:
        cls, fields, hook = _CLASSES[value[0]]
        obj = cls.__new__(cls)
        for name, field in zip(fields, value[1:], strict=False):
            setattr(obj, name, made(field))
        if hook:
            obj._deserialize()
        return obj
    if type(value) is list:
        return [made(v) for v in value]
    if type(value) is dict:
        return {k: made(v) for k, v in value.items()}
    return value


def load(data: dict[str, Any], memo: dict[int, Any], **options: Any) -> Lark:
    """lark's standalone entry point (`Lark._load_from_dict`) on a memo of tuples."""
    return Lark._load_from_dict(data, {k: made(v) for k, v in memo.items()}, **options)
