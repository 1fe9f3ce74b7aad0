"""A family whose fields are its terminals is read without a transformer method (issue 9)."""

from __future__ import annotations

from triage.model import events as ev
from triage.model.events.base import KINDS
from triage.parse import transform_default
from triage.parse.lark_runtime import Token, Tree
from triage.parse.transform import TRANSFORMER
from triage.parse.transform_default import fields_from_terminals


def test_every_event_class_is_registered_by_its_kind():
    assert KINDS["torch_oom"] is ev.TorchOom and KINDS["disk_full"].__name__ == "DiskFull"
    assert all(cls.kind == kind for kind, cls in KINDS.items())


def test_terminals_named_like_fields_fill_them_typed_by_the_annotation():
    tokens = [
        Token("HEAD", "Disk quota exceeded"),
        Token("PATH", "/root/.cache"),
        Token("NEEDED", "2.00 GiB"),
        Token("WARNING", "warning"),
        Token("FREE", "1,024"),
    ]
    item = fields_from_terminals("disk_full", tokens)
    assert item == {"kind": "disk_full", "path": "/root/.cache", "needed": 2 * 1024**3, "warning": True, "free": 1024}


def test_a_figure_that_is_not_one_leaves_the_default():
    item = fields_from_terminals("disk_full", [Token("NEEDED", "lots")])
    assert item == {"kind": "disk_full"}


def test_a_start_rule_without_a_method_becomes_its_event(monkeypatch):
    # gpu_info has no transformer method (the evidence reader makes it): as a start rule it is read
    monkeypatch.setattr(transform_default, "START_RULES", (*transform_default.START_RULES, "gpu_info"))
    made = TRANSFORMER.transform(Tree("gpu_info", [Token("NAME", "NVIDIA H100 80GB HBM3"), Token("INDEX", "3")]))
    assert made["kind"] == "gpu_info" and made["name"] == "NVIDIA H100 80GB HBM3" and made["index"] == 3


def test_a_rule_that_is_no_family_stays_a_tree():
    made = TRANSFORMER.transform(Tree("gpu_info", [Token("NAME", "x")]))
    assert isinstance(made, Tree)
