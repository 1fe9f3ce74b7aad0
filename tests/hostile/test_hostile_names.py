"""File names are bytes, paths can be refused by the system, logs come in UTF-32.

A log whose name is not UTF-8 gets a report in every format (the name shown with `\\xNN`
escapes), in `-o` files, the step summary and `batch` (where one such name must not fail the
others); a path the system refuses (too long) is one line on stderr, exit 2, wherever it is
given; UTF-32 with a BOM, either byte order, is read like the UTF-8 text it spells, and
UTF-16 that starts with a NUL character is still UTF-16.
"""

from __future__ import annotations

import io
import json
import os

import pytest
from conftest import FIXTURES

from triage.apps.cli import main
from triage.render import FORMATS

LOG = FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"
BAD = b"run-\xff\xfe-\x80.log"  # not UTF-8
LONG = "a" * 300


def cli(argv: list[str], stdin: bytes | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdin=io.BytesIO(stdin) if stdin is not None else None, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def bad_name(tmp_path) -> str:
    path = os.path.join(os.fsencode(tmp_path), BAD)
    with open(path, "wb") as fh:
        fh.write(LOG.read_bytes())
    return os.fsdecode(path)


def test_a_name_that_is_not_utf8_is_shown_escaped_in_every_format(bad_name, tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    for fmt in FORMATS:
        target = tmp_path / f"report.{fmt}"
        code, out, err = cli([bad_name, "-f", fmt, "-o", str(target), "-f", fmt])
        assert (code, err) == (1, ""), (fmt, err)
        written = target.read_text(encoding="utf-8")
        assert "run-\\xff\\xfe-\\x80.log" in written.replace("\\\\", "\\"), fmt
        out.encode("utf-8")
    assert "run-\\\\xff\\\\xfe-\\\\x80.log" in summary.read_text(encoding="utf-8")  # Markdown escapes the backslash
    code, out, err = cli([bad_name, "-q"])
    assert code == 1 and "run-\\xff\\xfe-\\x80.log: failed" in out


def test_one_bad_name_does_not_fail_a_batch(bad_name, tmp_path):
    (tmp_path / "good.log").write_bytes(LOG.read_bytes())
    jsonl = tmp_path / "out.jsonl"
    code, out, err = cli(["batch", str(tmp_path), "--jobs", "1", "--jsonl", str(jsonl)])
    records = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    assert code == 1 and len(records) == 2 and all("diagnoses" in r for r in records), err
    assert any(r["input"]["name"].endswith("run-\\xff\\xfe-\\x80.log") for r in records)
    assert "kv_cache_insufficient        2" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["{log}", "--rules", LONG],
        ["{log}", "-o", "{tmp}/" + LONG],
        [LONG + ".log"],
        ["{tmp}/" + LONG + "/x.log"],
        ["batch", "{log}", "--jobs", "1", "--jsonl", "{tmp}/" + LONG],
        ["{log}", "--rules", "{tmp}/" + LONG + "/p.yaml"],
    ],
)
def test_a_path_the_system_refuses_is_one_line(argv, tmp_path):
    code, _out, err = cli([a.format(log=LOG, tmp=tmp_path) for a in argv])
    assert code == 2 and err.count("\n") == 1 and "internal error" not in err, err
    assert "File name too long" in err or "no such file" in err or "no log files" in err


def _summary(data: bytes) -> tuple:
    code, out, _ = cli(["-", "-f", "json"], stdin=data)
    report = json.loads(out)
    return code, report["input"]["lines"], report["failure"]["line"], [d["id"] for d in report["diagnoses"]]


@pytest.mark.parametrize(
    "bom, codec", [(b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"), (b"", "utf-32")]
)
def test_utf32_with_a_bom_reads_like_utf8(bom, codec):
    text = LOG.read_text(encoding="utf-8")
    assert _summary(bom + text.encode(codec)) == _summary(text.encode("utf-8"))


def test_utf16_starting_with_a_nul_character_is_still_utf16():
    text = "\x00" + LOG.read_text(encoding="utf-8")
    assert _summary(text.encode("utf-16"))[3] == ["kv_cache_insufficient"]
