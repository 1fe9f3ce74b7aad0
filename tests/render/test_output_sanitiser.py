"""No text from the input drives a terminal or a CI runner, in any format.

A report is built with hostile text in every field that quotes the input (the name, the
failure and its echoes, a diagnosis's fields, evidence, facts, notes), rendered in every
format the way the CLI renders it, and the output is held to what a terminal and the CI
runners act on: no escape or control character (a tab and a newline only), no
bidirectional control, no lone surrogate (the text encodes as UTF-8), no GitHub command
(`::name` at a line's start, a known command name anywhere, the older `##[name]` anywhere),
no Azure `##vso[` and no GitLab section marker. In the `github` format the only commands
are the renderer's own, one a line.
"""

from __future__ import annotations

import io
import re

import pytest
from conftest import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st

from triage.apps.cli import main
from triage.apps.output import render_all
from triage.model.report import Diagnosis, Echo, Evidence, Failure, InputInfo, Remedy, Report
from triage.render import FORMATS
from triage.render.sanitise import BIDI, clean

PIECES = [
    "\x1b[2J",
    "\x1bc",
    "\x1b(0",
    "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\",
    "\x1b]52;c;ZWNobyBoaQ==\x07",
    "\x9b31m",
    "\r",
    "\n",
    "\t",
    "\x00",
    "\x7f",
    "\u2028",
    "\udcff",
    "::warning::forged",
    "::stop-commands::tok",
    "##[stop-commands]",
    "##[error]x",
    "##vso[task.setvariable]",
    "##VSO[task.complete]",
    "section_start:1700000000:evil[collapsed=true]",
    "section_end:1:evil",
    "::add-mask::x",
    " ::set-output name=a::b",
    "c10::Error",
    "x",
    " ",
    "a.log",
] + list(BIDI)
HOSTILE = st.lists(st.sampled_from(PIECES), min_size=1, max_size=6).map("".join)
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029{BIDI}]")
_GITHUB_NAMES = (
    r"(?:error|warning|notice|debug|group|endgroup|add-mask|stop-commands|set-output|set-env|add-path"
    r"|save-state|echo|add-matcher|remove-matcher)\b"
)


def hostile_report(text: str) -> Report:
    evidence = [Evidence(line=7, text=f"ERROR 06-02 05:17:18 [core.py:387] {text}", origin=f"Engine{text}")]
    diagnosis = Diagnosis(
        id="unknown_failure",
        title="A cause",
        confidence=0.5,
        explanation=f"Because {text}",
        evidence=evidence,
        remedies=[Remedy(text="fix it", flags={"--model": text})],
    )
    return Report(
        input=InputInfo(name=f"{text}.log", lines=9, bytes=100),
        outcome="failed",
        failure=Failure(
            line=7,
            message=f"{text}\n{text}",
            origin=text,
            exception=text,
            downstream=[Echo(line=9, origin=text, message=text)],
        ),
        facts={"model": text, "max_model_len": 4096},
        diagnoses=[diagnosis],
        notes=[f"note {text}"],
    )


def assert_inert(out: str, fmt: str) -> None:
    out.encode("utf-8")  # no lone surrogate
    assert not _CONTROL.search(out.replace("\r\n", "\n")), (fmt, _CONTROL.search(out))
    assert not re.search(r"(?i)##\[|##vso\[|section_(?:start|end):", out), fmt
    for line in out.splitlines():
        body = line
        if fmt == "github":
            own = re.match(r"::(?:error|warning|notice)(?: [^:]*)?::", line)
            assert own, line
            body = line[own.end() :]
        start = body.lstrip()
        assert not (start.startswith("::") and "::" in start[2:]), (fmt, line)  # what the runner acts on
        assert not re.search(r"(?<![\w:])::" + _GITHUB_NAMES, body, re.I), (fmt, line)


@settings(max_examples=60, deadline=None)
@given(HOSTILE)
def test_no_input_text_reaches_a_terminal_or_a_runner_in_any_format(text):
    for fmt in (*FORMATS, "quiet"):
        for color in (False, True):
            out = render_all([hostile_report(text)], fmt, width=60, color=color)
            assert_inert(re.sub(r"\x1b\[[0-9;]*m", "", out) if color else out, fmt)  # the tool's own colours


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40))
def test_the_sanitiser_is_idempotent_and_keeps_printable_text(text):
    once = clean(text)
    assert clean(once) == once and clean(clean(text, True), True) == clean(text, True)
    if text.isprintable() and "::" not in text and "##" not in text and "section_" not in text:
        assert once == text


@pytest.mark.parametrize(
    "text, shown",
    [
        ("\x1b[2J", "\\x1b[2J"),
        ("a\u202eb", "a\\u202eb"),
        ("\udcff.log", "\\xff.log"),
        ("\x9b", "\\x9b"),
        ("##[stop-commands]", "# #[stop-commands]"),
        ("x ::warning::y", "x : :warning::y"),
        ("c10::Error", "c10::Error"),
        ("c10::Error::Error(c10::SourceLocation)", "c10::Error::Error(c10::SourceLocation)"),
        ("a\r\nb", "a\nb"),
    ],
)
def test_what_the_sanitiser_shows(text, shown):
    assert clean(text) == shown


def test_a_log_and_a_file_name_that_command_the_runner(tmp_path):
    """Through the CLI: escapes and commands in a log line and in the file's name, every format."""
    lines = (FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log").read_text()
    lines = lines.split("\n")
    lines[57] += " \x1b[2J\x1bc\x1b]52;c;ZWNobyBoaQ==\x07 \u202eevil ##[stop-commands] ##vso[task.complete]"
    path = tmp_path / "run\n::warning::forged\x1b[2J##[stop-commands].log"
    path.write_text("\n".join(lines), encoding="utf-8")
    for fmt in FORMATS:
        out, err = io.StringIO(), io.StringIO()
        assert main([str(path), "-f", fmt], stdout=out, stderr=err) == 1
        assert_inert(out.getvalue(), fmt)
    out, err = io.StringIO(), io.StringIO()
    assert main([str(tmp_path / "missing\n::warning::x\x1b[2J.log")], stdout=out, stderr=err) == 2
    assert err.getvalue().count("\n") == 1 and "\x1b" not in err.getvalue()
    assert_inert(err.getvalue(), "stderr")


def test_a_rule_pack_s_words_are_inert_in_rules_list_and_explain(tmp_path):
    """A pack is a stranger's text too: its title reaches `rules list`, `explain` and reports."""
    pack = tmp_path / "hostile.yaml"
    pack.write_text(
        "schema: 1\nrules:\n  - id: hostile-title\n    cause: kv_cache_insufficient\n"
        '    title: "x\\e[2J\\u202e ##[stop-commands] ##vso[task.complete]"\n'
        '    when: {event: kv_needed}\n    explanation: "::warning::forged"\n',
        encoding="utf-8",
    )
    for argv in (["rules", "list", str(pack)], ["explain", "kv_cache_insufficient", "--rules", str(pack)]):
        out, err = io.StringIO(), io.StringIO()
        assert main(argv, stdout=out, stderr=err) == 0, err.getvalue()
        assert "hostile-title" in out.getvalue()
        assert_inert(out.getvalue(), "rules")
