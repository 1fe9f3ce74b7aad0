"""Bounded cost, counted in work and checked on outcomes, never timed.

- the tmux position-marker test looks at the last 17 characters of a line, never at the
  run of spaces before them (searched with a leading `\\s*`, a line of spaces ending in a
  near-marker was tried from every offset: quadratic);
- a run of one repeated trigger line (a million `Killed`) hands the pipeline its first and
  last copies, the others only counted: the reports are those of the unskipped scan;
- `plan` refuses implausible figures of config.json in one line before any arithmetic, and a
  safetensors header with huge dimensions stops at the first one (never a product thousands
  of digits long);
- `--width` is capped, and the cap is in `--help`.
"""

from __future__ import annotations

import functools
import io
import json
import struct

import pytest
from conftest import FIXTURES, ROOT

from triage import pipeline
from triage.apps.cli import _triage_parser, main
from triage.ingest import lines, scan
from triage.ingest.read import InputStats, iter_chunks
from triage.parse import vocabulary

KILLED = FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"
LLAMA = ROOT / "fixtures" / "configs" / "llama-3.2-1b-instruct" / "config.json"


class _Spy:
    """The marker pattern, recording how many characters each call may look at."""

    def __init__(self, pattern) -> None:
        self.pattern, self.spans = pattern, []

    def match(self, text: str, pos: int = 0):
        self.spans.append(len(text) - pos)
        return self.pattern.match(text, pos)

    def search(self, text: str, pos: int = 0):
        self.spans.append(len(text) - pos)
        return self.pattern.search(text, pos)


@pytest.mark.parametrize("tail", ["[1/2 ]", "[12345678/1]", "[a/1]", "x/y]"])
def test_the_tmux_marker_test_reads_only_the_line_s_tail(monkeypatch, tail):
    spy = _Spy(lines._TMUX_MARK.compiled)
    monkeypatch.setattr(lines, "_TMUX_MARK", spy)
    text = " " * 50_000 + tail
    assert lines.peel(text, 1).text.strip() == tail
    assert all(span <= lines.TMUX_MARK_CHARS for span in spy.spans), spy.spans[:3]


def test_a_real_tmux_marker_is_still_peeled():
    assert (
        lines.peel("ERROR 10-02 16:20:11 [x.py:1] CUDA error: out of memory   [31/357]", 1).text
        == "CUDA error: out of memory"
    )
    assert lines.peel("a table | [1/2]", 1).text.endswith("[1/2]")


def _handed_on(data: bytes) -> tuple[list[int], int, int]:
    """The numbers of the lines the scan hands on, the lines counted, the chunks read."""
    stats = InputStats(name="x")
    chunks = list(iter_chunks(io.BytesIO(data), stats))
    marked = scan.iter_marked(iter(chunks), stats, vocabulary.matcher(), 3)
    return [no for no, *_ in marked], stats.lines, len(chunks)


@pytest.mark.parametrize("word", [b"Killed", b"Segmentation fault (core dumped)", b"CUDA error: out of memory"])
def test_a_run_of_one_trigger_line_hands_on_its_first_and_last_copy(word):
    """A few lines a chunk (its first copy, the copy it ends with, one cut by its edge), not one a line."""
    n = 200_000
    handed, counted, chunks = _handed_on((word + b"\n") * n + b"after\n")
    assert counted == n + 1 and handed[0] == 1 and n in handed
    assert len(handed) <= 4 * chunks + 2, (len(handed), chunks)
    assert 4 * chunks + 2 < n // 1000  # the bound is far below one a line


def _report(data: bytes, quiet: bool, monkeypatch) -> dict:
    monkeypatch.setattr(pipeline, "iter_marked", functools.partial(scan.iter_marked, quiet=quiet))
    return json.loads(pipeline.run(io.BytesIO(data), "x.log").model_dump_json())


def test_skipping_the_copies_changes_no_report(monkeypatch):
    log = KILLED.read_bytes().split(b"\n")
    fatal = log[57]
    runs = log[:57] + [fatal] * 5000 + log[58:] + [b"Killed"] * 3000
    data = b"\n".join(runs)
    assert _report(data, True, monkeypatch) == _report(data, False, monkeypatch)


def _plan(config: dict, tmp_path, header: bytes | None = None) -> tuple[int, str, str]:
    (tmp_path / "config.json").write_text(json.dumps(config))
    if header is not None:
        (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", "--model", str(tmp_path), "--gpu", "A100-40GB", "-f", "json"], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    "key, value",
    [
        ("num_attention_heads", 0),
        ("num_attention_heads", -8),
        ("num_attention_heads", 32.5),
        ("num_attention_heads", True),
        ("num_key_value_heads", 0),
        ("head_dim", 0),
        ("head_dim", -64),
        ("vocab_size", float("nan")),
        ("vocab_size", 10**300),
        ("hidden_size", 1e300),
        ("max_position_embeddings", float("inf")),
        ("intermediate_size", -1),
        ("rope_scaling", {"rope_type": "llama3", "factor": float("nan")}),
    ],
)
def test_an_implausible_config_figure_is_one_line_never_fits(tmp_path, key, value):
    config = json.loads(LLAMA.read_text())
    config[key] = value
    code, out, err = _plan(config, tmp_path)
    assert (code, out) == (2, "") and err.count("\n") == 1, (code, err)
    assert "not plausible" in err and key.split("_scaling")[0] in err and "internal error" not in err


def test_a_plausible_config_still_fits(tmp_path):
    code, out, _err = _plan(json.loads(LLAMA.read_text()), tmp_path)
    assert code == 0 and json.loads(out)["verdict"] == "fits"


def test_huge_safetensors_dimensions_stop_at_the_first_one(tmp_path):
    tensors = {f"t{i}": {"dtype": "F4", "shape": [10**200] * 16, "data_offsets": [0, 1]} for i in range(3000)}
    _code, out, err = _plan(json.loads(LLAMA.read_text()), tmp_path, json.dumps(tensors).encode())
    notes = json.loads(out)["notes"]
    assert err == "" and any("'t0': dimension" in n and "not plausible" in n for n in notes), notes
    assert json.loads(out)["weights_source"].startswith("estimated")  # counted from config.json instead


def test_width_is_capped_and_the_cap_is_in_help():
    out, err = io.StringIO(), io.StringIO()
    assert main([str(KILLED), "--width", "1000000000"], stdout=out, stderr=err) == 2
    assert err.getvalue().count("\n") == 1 and "1000" in err.getvalue() and out.getvalue() == ""
    assert "20 to 1000" in " ".join(_triage_parser().format_help().split())
