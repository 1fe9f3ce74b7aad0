"""`triage.records`: what its classes promise is a frozen (or mutable) dataclass's behaviour,
whether an instance was made by the generic `__init__` (a class's first instances) or by the
compiled one."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from triage import records
from triage.records import Record, field, replace


class Point(Record):
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)


class Point3(Point):
    z: int = 5
    y: int = 7  # a base's field, given a new default: it keeps its place


class Pos(Record, kw_only=False):
    a: int
    b: str = "b"


class Box(Record, frozen=False, kw_only=False):
    items: list[int] = field(default_factory=list)
    size: int = 0


def _both_ways(cls, *args, **kwargs):
    """An instance made by the generic __init__ and one made by the compiled __init__."""
    first = cls(*args, **kwargs)
    compiled = records._compile_init(cls)
    second = cls.__new__(cls)
    compiled(second, *args, **kwargs)
    return first, second


@pytest.mark.parametrize(
    "cls, args, kwargs",
    [
        (Point, (), {"x": 1}),
        (Point, (), {"x": 1, "y": 2, "tags": ["a"]}),
        (Point3, (), {"x": 1}),
        (Pos, (1,), {}),
        (Pos, (1, "c"), {}),
        (Pos, (), {"b": "z", "a": 3}),
        (Box, (), {}),
        (Box, ([1],), {"size": 2}),
    ],
)
def test_generic_and_compiled_init_agree(cls, args, kwargs):
    a, b = _both_ways(cls, *args, **kwargs)
    assert a == b and repr(a) == repr(b)


@pytest.mark.parametrize(
    "call",
    [
        lambda: Point(1),
        lambda: Point(),
        lambda: Point(x=1, w=2),
        lambda: Pos(1, "b", 3),
        lambda: Pos(1, a=1),
        lambda: Pos(),
    ],
)
def test_calls_that_do_not_fit_raise_type_error(call):
    with pytest.raises(TypeError):
        call()


def test_fields_defaults_and_order():
    assert Point3._names == ("x", "y", "tags", "z")
    p = Point3(x=1)
    assert (p.x, p.y, p.tags, p.z) == (1, 7, [], 5)
    assert Point(x=1).tags is not Point(x=1).tags  # a factory makes each its own
    assert [f.name for f in dataclasses.fields(Point3)] == ["x", "y", "tags", "z"]
    assert dataclasses.is_dataclass(Point(x=1)) and Pos.__match_args__ == ("a", "b") and Point.__match_args__ == ()


def test_frozen_records_refuse_assignment_and_hash_by_value():
    p = Point(x=1, y=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        p.other = 3  # type: ignore[attr-defined]
    assert p == Point(x=1, y=2) and p != Point(x=1, y=3) and Pos(1) != Point(x=1)
    assert hash(Pos(1)) == hash(Pos(1))


def test_mutable_records_assign_and_are_unhashable():
    b = Box()
    b.size = 3
    b.extra = "kept"  # a mutable record keeps a __dict__, as a plain dataclass does
    assert b.size == 3 and b.extra == "kept"
    with pytest.raises(TypeError):
        hash(b)


def test_replace_pickle_and_copy():
    p = Point3(x=1, tags=["t"])
    assert replace(p, y=9) == dataclasses.replace(p, y=9) == Point3(x=1, y=9, tags=["t"])
    for q in (pickle.loads(pickle.dumps(p)), copy.copy(p), copy.deepcopy(p)):
        assert q == p and type(q) is Point3
    box = Box([1], 2)
    box.extra = "kept"
    again = pickle.loads(pickle.dumps(box))
    assert again == box and again.extra == "kept"


def test_a_class_made_often_gets_its_compiled_init():
    class Often(Record):
        n: int = 0

    for i in range(records.COMPILE_AFTER + 1):
        assert Often(n=i).n == i
    assert Often.__dict__["__init__"] is not records._first_init
    assert Often(n=3) == Often(n=3)


def test_positional_fields_keep_dataclass_order_rules():
    with pytest.raises(TypeError):

        class Bad(Record, kw_only=False):
            a: int = 0
            b: int
