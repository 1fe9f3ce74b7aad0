"""What the pipeline relies on in its value classes (msgspec Structs): frozen parts that are
hashed and shared, copies that re-check what their constructor checks, pickling for the
rules cache and Ray, keyword-only construction where the fields' order is no contract."""

from __future__ import annotations

import pickle

import msgspec
import pytest

from triage.apps.fleet.sources import Source
from triage.ingest.lines import Line
from triage.model.report import Diagnosis, InputInfo, RemedyCheck, Report


def test_lines_are_frozen_hashable_and_positional():
    line = Line(3, "boom")
    with pytest.raises(AttributeError):
        line.text = "x"  # type: ignore[misc]
    assert {line, Line(3, "boom")} == {line}
    assert msgspec.structs.replace(line, no=4) == Line(4, "boom")


def test_a_fleet_source_survives_pickling():
    """Ray carries the sources (frozen, keyword-only) to its workers."""
    source = Source(name="a.log", url="/tmp/a.log", size=3)
    assert pickle.loads(pickle.dumps(source)) == source


def test_report_parts_are_keyword_only_mutable_and_unhashable():
    with pytest.raises(TypeError):
        InputInfo("x.log", 1, 2)  # type: ignore[misc]
    report = Report(input=InputInfo(name="x.log", lines=1, bytes=2), outcome="healthy")
    report.notes.append("a note")
    assert report.notes == ["a note"] and Report(input=report.input, outcome="healthy").notes == []
    with pytest.raises(TypeError):
        hash(report)


def test_a_copy_stores_whole_numbers_as_floats_as_construction_does():
    """The JSON writes `1.0` for a float field given 1, built or copied (pydantic's reading)."""
    d = Diagnosis(id="x", title="t", confidence=1, explanation="e")
    assert isinstance(d.confidence, float)
    assert isinstance(d.model_copy(update={"confidence": 1}).confidence, float)
    check = RemedyCheck(against="startup_free_memory", verdict="fits", margin=2)
    assert check.model_dump_json().startswith('{"against":"startup_free_memory","verdict":"fits","margin":2.0')
