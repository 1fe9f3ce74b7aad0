"""Value classes with a dataclass's behaviour, built for a fraction of what `dataclasses` costs.

`@dataclass` generates and compiles (`exec`) an `__init__`, frozen guards and more for each
class when its module is imported: for the hundred classes of a run that was ~30 ms, a fifth
of a small log's triage. A `Record` subclass is made by its metaclass in a few microseconds:
the fields are read off the annotations and (frozen) the slots declared. A class's first
instances are made by a generic `__init__`; one made often gets its own, compiled (a run
makes ~200 records, of ~40 classes).

What callers see is a dataclass's: fields in declaration order (a base's first), defaults
and `field(default_factory=...)`, keyword-only (`kw_only=False`: positional too), frozen with slots
(`frozen=False`: mutable, with a `__dict__`, unhashable), `FrozenInstanceError` on
assignment, equality and hashing by value, pickling, and `dataclasses.fields` / `replace` /
`is_dataclass` (their `__dataclass_fields__` is built, through `dataclasses`, when first
asked for: only tests and tools ask). `lazy_dataclass` is the cheap form of a class that
must stay a real dataclass (the report: pydantic validates it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:  # PEP 681: type checkers and editors read a record's fields as a dataclass's
    from dataclasses import field as dataclasses_field

    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda cls: cls

    dataclasses_field = None

T = TypeVar("T")

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING", "__slots__": ()})()


class Factory:
    """A default made anew for each instance (`field(default_factory=...)`)."""

    __slots__ = ("make",)

    def __init__(self, make: Any) -> None:
        self.make = make


def field(*, default_factory: Callable[[], T]) -> T:
    """`x: list[str] = field(default_factory=list)`: each instance gets its own (as `dataclasses.field`)."""
    return Factory(default_factory)  # type: ignore[return-value]


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    return annotation is ClassVar or getattr(annotation, "__origin__", None) is ClassVar


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(field,))
class _RecordType(type):
    """Makes each class a record: `_fields` (name -> (annotation, default)), `_names` (in
    order), and for a frozen one `__slots__` for the fields the class adds.

    Class keywords, inherited by subclasses: `frozen` (default True; a mutable record keeps a
    `__dict__` and is unhashable, as a mutable dataclass is) and `kw_only` (default True)."""

    def __new__(
        mcls,
        name: str,
        bases: tuple[type, ...],
        ns: dict[str, Any],
        *,
        frozen: bool | None = None,
        kw_only: bool | None = None,
    ) -> _RecordType:
        fields: dict[str, tuple[Any, Any]] = {}
        for base in reversed(bases):
            fields.update(getattr(base, "_fields", {}))
        inherited = set(fields)
        for field, annotation in ns.get("__annotations__", {}).items():
            if _is_classvar(annotation):
                continue
            default = ns.pop(field, MISSING)
            if getattr(type(default), "__hash__", None) is None:
                raise ValueError(
                    f"mutable default {type(default).__name__} for field {field}: use field(default_factory=...)"
                )
            fields[field] = (annotation, default)
        frozen = _setting(bases, "_frozen", frozen)
        kw_only = _setting(bases, "_kw_only", kw_only)
        if not kw_only:
            _check_order(name, fields)
        ns.update(_fields=fields, _names=tuple(fields), _frozen=frozen, _kw_only=kw_only)
        if frozen:
            ns["__slots__"] = tuple(f for f in fields if f not in inherited)
        else:
            ns.setdefault("__setattr__", object.__setattr__)
            ns.setdefault("__delattr__", object.__delattr__)
            ns.setdefault("__hash__", None)  # mutable and compared by value: unhashable
        ns.setdefault("__match_args__", () if kw_only else tuple(fields))
        ns.setdefault("__init__", _first_init)
        return super().__new__(mcls, name, bases, ns)


def _setting(bases: tuple[type, ...], name: str, given: bool | None) -> bool:
    if given is not None:
        return given
    return next((getattr(b, name) for b in bases if hasattr(b, name)), True)


def _check_order(name: str, fields: dict[str, tuple[Any, Any]]) -> None:
    """Positional fields: one without a default may not follow one with (as in a dataclass)."""
    defaulted = None
    for field, (_, default) in fields.items():
        if default is MISSING and defaulted:
            raise TypeError(f"{name}: non-default argument {field!r} follows default argument {defaulted!r}")
        defaulted = defaulted or (field if default is not MISSING else None)


class _DataclassFields:
    """`__dataclass_fields__`, as `dataclasses.Field`s, built when first read: only
    `dataclasses.fields`, `replace` and `is_dataclass` read it (tests, tools), never a run."""

    def __get__(self, obj: Any, owner: type) -> dict[str, Any]:
        made = _DATACLASS_FIELDS.get(owner)
        if made is None:
            made = _DATACLASS_FIELDS[owner] = _as_dataclass_fields(owner)
        return made


_DATACLASS_FIELDS: dict[type, dict[str, Any]] = {}


# Instances a class makes through the generic `__init__` before its own is compiled: a run
# makes a few of most classes (a small log ~200 records in all), where compiling ~40
# `__init__`s would cost ~4 ms; a class made thousands of times gets the compiled one.
COMPILE_AFTER = 64
_MADE: dict[type, int] = {}


def _first_init(self: Any, *args: Any, **kwargs: Any) -> None:
    """Set the fields the generic way while a class is new; then compile its `__init__`,
    install it and run it (also at once for a call that is not well formed, so the
    TypeError is exactly Python's)."""
    cls = next(c for c in type(self).__mro__ if c.__dict__.get("__init__") is _first_init)
    made = _MADE.get(cls, 0)
    if made < COMPILE_AFTER and _generic_init(cls, self, args, kwargs):
        _MADE[cls] = made + 1
        return
    init = _compile_init(cls)
    type.__setattr__(cls, "__init__", init)
    init(self, *args, **kwargs)


def _generic_init(cls: Any, self: Any, args: tuple, kwargs: dict[str, Any]) -> bool:
    """What the compiled `__init__` does, read off `_fields`; False (nothing set) when the
    call does not fit the fields: the compiled one then raises Python's own TypeError."""
    fields = cls._fields
    if args:
        if cls._kw_only or len(args) > len(fields) or any(n in kwargs for n in cls._names[: len(args)]):
            return False
        kwargs = {**dict(zip(cls._names, args, strict=False)), **kwargs}
    if any(k not in fields for k in kwargs):
        return False
    values = []
    for name, (_, default) in fields.items():
        if name in kwargs:
            values.append(kwargs[name])
        elif default is MISSING:
            return False
        else:
            values.append(default.make() if isinstance(default, Factory) else default)
    for name, value in zip(fields, values, strict=True):
        object.__setattr__(self, name, value)
    if hasattr(cls, "__post_init__"):
        self.__post_init__()
    return True


def _compile_init(cls: Any) -> Any:
    """`def __init__(self, *, a=<default>, b, ...)`: a frozen record sets each slot through
    its member descriptor (faster than the `object.__setattr__` of a frozen dataclass's
    `__init__`), a mutable one assigns."""
    params, body, scope = [], [], {"MISSING": MISSING}
    for i, (name, (_, default)) in enumerate(cls._fields.items()):
        if cls._frozen:
            scope[f"_set{i}"] = getattr(cls, name).__set__  # the slot's member descriptor
            assign = f"    _set{i}(self, {{}})"
        else:
            assign = f"    self.{name} = {{}}"
        if isinstance(default, Factory):
            scope[f"_make{i}"] = default.make
            params.append(f"{name}=MISSING")
            body.append(assign.format(f"_make{i}() if {name} is MISSING else {name}"))
        else:
            if default is not MISSING:
                scope[f"_default{i}"] = default
            params.append(name if default is MISSING else f"{name}=_default{i}")
            body.append(assign.format(name))
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    star = "*, " if params and cls._kw_only else ""
    source = f"def __init__(self, {star}{', '.join(params)}):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(compile(source, f"<record {cls.__qualname__}>", "exec"), scope)
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _as_dataclass_fields(cls: Any) -> dict[str, Any]:
    """The `__dataclass_fields__` a frozen kw-only dataclass with these fields would have."""
    import dataclasses

    ns: dict[str, Any] = {"__annotations__": {}, "__module__": cls.__module__, "__qualname__": cls.__qualname__}
    for name, (annotation, default) in cls._fields.items():
        ns["__annotations__"][name] = annotation
        if isinstance(default, Factory):
            ns[name] = dataclasses.field(default_factory=default.make)
        elif default is not MISSING:
            ns[name] = default
    shadow: Any = dataclasses.dataclass(frozen=cls._frozen, kw_only=cls._kw_only, init=False, repr=False, eq=False)(
        type(cls.__name__, (), ns)
    )
    return shadow.__dataclass_fields__


def _frozen(name: str) -> AttributeError:
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(f"cannot assign to field {name!r}")


class Record(metaclass=_RecordType):
    """Subclass and annotate: `class Span(Record): start: int; end: int = 0`."""

    _fields: ClassVar[dict[str, tuple[Any, Any]]]
    _names: ClassVar[tuple[str, ...]]
    _frozen: ClassVar[bool]
    _kw_only: ClassVar[bool]
    __dataclass_fields__: ClassVar[Any] = _DataclassFields()

    def __setattr__(self, name: str, value: Any) -> None:
        raise _frozen(name)

    def __delattr__(self, name: str) -> None:
        raise _frozen(name)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _values(self) == _values(other)

    def __hash__(self) -> int:
        return hash(_values(self))

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self._names)})"

    def __getstate__(self) -> Any:
        """A frozen record's field values; a mutable one's `__dict__` (what else was set on it too)."""
        return _values(self) if self._frozen else dict(vars(self))

    def __setstate__(self, state: Any) -> None:
        items = state.items() if isinstance(state, dict) else zip(self._names, state, strict=False)
        for name, value in items:
            object.__setattr__(self, name, value)


def _values(obj: Record) -> tuple[Any, ...]:
    return tuple(getattr(obj, name) for name in obj._names)


def replace(obj: Record, **changes: Any) -> Any:
    """A copy with some fields changed (`dataclasses.replace`, without building its fields)."""
    for name in obj._names:
        if name not in changes:
            changes[name] = getattr(obj, name)
    return obj.__class__(**changes)


def field_names(cls: type[Record]) -> tuple[str, ...]:
    """The data fields, in order."""
    return cls._names


def field_annotations(cls: type[Record]) -> dict[str, Any]:
    """Field name -> its annotation (a string in modules that defer annotations)."""
    return {name: annotation for name, (annotation, _) in cls._fields.items()}


@dataclass_transform(kw_only_default=True, field_specifiers=(dataclasses_field,))
def lazy_dataclass(cls: type[T]) -> type[T]:
    """`@dataclass(kw_only=True)` for classes that must stay real dataclasses (pydantic
    validates them), with the three generated methods left out: the class brings `__eq__`
    and `__repr__` of its own (generic, over `_names`), and its `__init__` is compiled, as a
    record's, on its first instance. ~4x cheaper to define than the full dataclass."""
    import dataclasses

    if not cls.__dict__.get("__doc__"):  # else dataclasses computes inspect.signature() for it
        cls.__doc__ = f"{cls.__name__}(...)"  # the prefix pydantic's JSON Schema skips as dataclasses' own
    made: Any = dataclasses.dataclass(kw_only=True, init=False, repr=False, eq=False)(cls)
    fields: dict[str, tuple[Any, Any]] = {}
    for f in dataclasses.fields(made):
        if f.default_factory is not dataclasses.MISSING:
            fields[f.name] = (f.type, Factory(f.default_factory))
        else:
            fields[f.name] = (f.type, MISSING if f.default is dataclasses.MISSING else f.default)
    made._fields, made._names, made._frozen, made._kw_only = fields, tuple(fields), False, True
    made.__init__ = _first_init
    return made
