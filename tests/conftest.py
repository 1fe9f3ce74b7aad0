"""Shared test helpers: paths, the shared corpus (optional), a pipeline runner."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml
from syrupy.extensions.json import JSONSnapshotExtension
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "logs"
SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "corpus"


def triage_bytes(data: bytes, name: str = "test.log"):
    from triage.pipeline import run

    return run(io.BytesIO(data), name)


def triage_text(text: str, name: str = "test.log"):
    return triage_bytes(text.encode("utf-8"), name)


def run_cli(argv, stdin: bytes | None = None) -> tuple[int, str, str]:
    """The CLI in-process: (exit code, stdout, stderr)."""
    from triage.apps.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdin=io.BytesIO(stdin) if stdin is not None else None, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def log_text(path: Path) -> str:
    """A log file's text as the tool decodes it (gzip, UTF-16 and BOMs), with its line ends."""
    from triage.ingest.read import InputStats, iter_chunks

    with open(path, "rb") as fh:
        data = b"".join(iter_chunks(fh, InputStats(name=path.name)))
    return data.decode("utf-8", errors="replace")


def triage_file(path: Path):
    from triage.pipeline import run_path

    return run_path(path)


def fixture_cases() -> list[tuple[Path, dict]]:
    cases = []
    for log in sorted(FIXTURES.glob("*/*.log")):
        expect = log.with_suffix(".expect.yaml")
        if expect.exists():
            try:
                cases.append((log, yaml.safe_load(expect.read_text())))
            except yaml.YAMLError as exc:
                cases.append((log, {"broken": str(exc)}))
    return cases


class TextSnapshot(SingleFileSnapshotExtension):
    """One readable file per snapshot, so a diff shows the report itself."""

    _write_mode = WriteMode.TEXT
    file_extension = "txt"


class MarkdownSnapshot(TextSnapshot):
    file_extension = "md"


class JsonSnapshot(JSONSnapshotExtension):
    pass


@pytest.fixture
def snapshot_txt(snapshot):
    return snapshot.use_extension(TextSnapshot)


@pytest.fixture
def snapshot_md(snapshot):
    return snapshot.use_extension(MarkdownSnapshot)


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JsonSnapshot)


@pytest.fixture(autouse=True)
def _fixed_report_time(monkeypatch):
    """Reports carry the time they were written (tool.generated_at): fixed here, so two runs of
    one command give the same bytes; tests of the clock itself remove the variable."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")  # 2026-01-01T00:00:00Z
