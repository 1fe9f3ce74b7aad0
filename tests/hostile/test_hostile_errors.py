"""Errors that help: one line on stderr saying what and where, exit 2; a traceback only on request.

Every error the tool reports is a `TriageError` (triage/errors.py). Anything else that
escapes is an internal error: `main` still prints one line (type and message, redacted)
and exits 2; `--traceback` adds the Python traceback for developers.
"""

from __future__ import annotations

import inspect
import io

import pytest
from conftest import FIXTURES

from triage import errors
from triage.apps.cli import main

LOG = FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"


def cli(argv: list[str], stdin: bytes | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdin=io.BytesIO(stdin) if stdin is not None else None, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_one_hierarchy():
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, Exception)]
    assert all(issubclass(c, errors.TriageError) for c in classes)
    assert str(errors.ExpressionError("bad", where="rules/a.yaml:3")) == "bad in rules/a.yaml:3"


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError("boom\nsecond line of the message"),
        RecursionError("maximum recursion depth exceeded"),
        MemoryError(),
        ValueError("x" * 5000),
        KeyError("k"),
        AttributeError("'NoneType' object has no attribute 'x'"),
    ],
    ids=["runtime", "recursion", "memory", "long", "key", "attribute"],
)
def test_internal_errors_are_one_line_without_a_traceback(exc, monkeypatch):
    def explode(*args, **kwargs):
        raise exc

    monkeypatch.setattr("triage.pipeline.run", explode)
    code, out, err = cli([str(LOG)])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("vllm-triage: internal error: ") and "Traceback" not in err
    assert type(exc).__name__ in err and "--traceback" in err and len(err) < 600

    code, _, err = cli([str(LOG), "--traceback"])
    assert code == 2 and "Traceback (most recent call last)" in err
    assert err.splitlines()[-1].startswith("vllm-triage: internal error: ")


def test_an_internal_error_in_a_renderer_is_one_line(monkeypatch):
    def explode(*args, **kwargs):
        raise TypeError("renderer broke")

    monkeypatch.setattr("triage.render.render", explode)
    code, _, err = cli([str(LOG), "-f", "markdown"])
    assert (
        code == 2
        and err == "vllm-triage: internal error: TypeError: renderer broke (run with --traceback for details)\n"
    )


def test_an_internal_error_message_is_redacted(monkeypatch):
    token = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"

    def explode(*args, **kwargs):
        raise RuntimeError(f"while reading token {token}")

    monkeypatch.setattr("triage.pipeline.run", explode)
    code, _, err = cli([str(LOG)])
    assert code == 2 and token not in err


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--format", "pdf", "x.log"], "invalid choice"),
        (["--no-such-flag", "x.log"], "unrecognized arguments"),
        ([], "required: LOG"),
        (["rules", "frobnicate"], "invalid choice"),
        (["x.log", "-f", "json", "-f", "markdown"], "more than one --format"),
        (["--width", "wide", "x.log"], "not a number"),
    ],
)
def test_usage_errors_are_one_line(argv, words):
    code, out, err = cli(argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and words in err and "Traceback" not in err


def test_a_triage_error_with_traceback_shows_both(tmp_path):
    code, _, err = cli([str(tmp_path), "--traceback"])
    assert code == 2 and "Traceback" in err and err.splitlines()[-1].endswith("is a directory, not a log file")


def test_an_unwritable_output_is_one_line(tmp_path):
    code, _, err = cli([str(LOG), "-o", str(tmp_path / "no" / "such" / "dir" / "r.md")])
    assert code == 2 and err.count("\n") == 1 and "cannot write" in err


def test_interrupt_and_broken_pipe(monkeypatch):
    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("triage.pipeline.run", interrupt)
    assert cli([str(LOG)])[0] == 130

    def broken(*args, **kwargs):
        raise BrokenPipeError

    monkeypatch.setattr("triage.pipeline.run", broken)
    code, _, err = cli([str(LOG)])
    assert code == 0 and err == ""


def test_a_yaml_error_spanning_lines_is_still_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema: 1\x00\nrules: []\n")
    code, _, err = cli(["rules", "check", str(bad)])
    assert code == 2 and err.count("\n") == 1 and f"{bad}" in err
