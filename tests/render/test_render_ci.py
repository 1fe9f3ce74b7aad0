"""The CI formats: GitHub workflow commands, JUnit XML, Slack Block Kit; their joins and the job summary."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET

import pytest
from conftest import FIXTURES, TextSnapshot, triage_file, triage_text

from triage.apps.cli import main
from triage.apps.output import render_all
from triage.model.report import Diagnosis, Evidence, Failure, InputInfo, Remedy, Report, VllmInfo
from triage.render import render
from triage.render.github import command, escape_data, escape_property

FAILED = FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"
HEALTHY = FIXTURES / "healthy" / "v1-0.10.2-qwen3-8b-h100-apiserver-prefix-free-memory-advice.log"
TWO_CAUSES = FIXTURES / "cuda_graph_capture_oom" / "v1-0.10.1-tp2-qwen3-14b-4090-piecewise-capture-oom.log"
LOGS = {"failed": FAILED, "healthy": HEALTHY, "two-causes": TWO_CAUSES}


class XmlSnapshot(TextSnapshot):
    file_extension = "xml"


@pytest.fixture
def snapshot_xml(snapshot):
    return snapshot.use_extension(XmlSnapshot)


def _diagnosis(i: int, **overrides) -> Diagnosis:
    fields = dict(
        id=f"cause_{i}",
        title=f"Cause number {i}",
        confidence=round(0.9 - i / 10, 2),
        explanation=f"Explanation {i}: 40 GiB > 38 GiB, so it cannot fit.",
        evidence=[Evidence(line=10 + i, text=f"ERROR line {10 + i}: something <failed> & stopped")],
        remedies=[
            Remedy(text="lower the utilization", flags={"--gpu-memory-utilization": "0.85"}),
            Remedy(
                text="let the allocator reuse segments", env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
            ),
        ],
    )
    fields.update(overrides)
    return Diagnosis(**fields)


def _report(
    outcome: str = "failed", diagnoses: int | list[Diagnosis] = 0, name: str = "startup.log", **overrides
) -> Report:
    failure = (
        Failure(
            phase="profiling",
            line=42,
            origin="VllmWorker rank=0",
            message="RuntimeError: something broke\n  at frame 1",
        )
        if outcome == "failed"
        else None
    )
    fields = dict(
        input=InputInfo(name=name, lines=100, bytes=5000),
        outcome=outcome,
        vllm=VllmInfo(version="0.10.1", engine="v1"),
        failure=failure,
        diagnoses=diagnoses if isinstance(diagnoses, list) else [_diagnosis(i) for i in range(1, diagnoses + 1)],
    )
    fields.update(overrides)
    return Report(**fields)


SYNTHETIC = {
    "undiagnosed": lambda: _report("failed"),
    "incomplete": lambda: _report("incomplete"),
    "four-causes": lambda: _report("failed", diagnoses=4),
}


def _all_cases():
    return [pytest.param(lambda p=p: triage_file(p), id=k) for k, p in LOGS.items()] + [
        pytest.param(f, id=k) for k, f in SYNTHETIC.items()
    ]


# --- snapshots -----------------------------------------------------------------------------


@pytest.mark.parametrize("make", _all_cases())
def test_github_snapshot(make, snapshot_txt):
    assert render(make(), "github") == snapshot_txt


@pytest.mark.parametrize("make", _all_cases())
def test_junit_snapshot(make, snapshot_xml):
    assert render(make(), "junit") == snapshot_xml


@pytest.mark.parametrize("make", _all_cases())
def test_slack_snapshot(make, snapshot_json):
    assert json.loads(render(make(), "slack")) == snapshot_json


# --- GitHub ----------------------------------------------------------------------------------


def test_github_escapes_messages_and_properties():
    assert escape_data("100% done\r\nnext: a, b") == "100%25 done%0D%0Anext: a, b"
    assert escape_property("100% done\r\nnext: a, b") == "100%25 done%0D%0Anext%3A a%2C b"
    d = _diagnosis(
        1,
        title="Disk: full, 100% used\nreally",
        explanation="50% of it: gone,\r\nsee above",
        remedies=[Remedy(text="more: disk", flags={"--x": "a,b"})],
    )
    out = render(_report("failed", name="run:1,a.log", diagnoses=[d]), "github")
    assert out.count("\n") == 1 and out.endswith("\n")
    line = out.rstrip("\n")
    props, message = line[len("::error ") :].split("::", 1)
    assert props == "file=run%3A1%2Ca.log,line=42,title=Disk%3A full%2C 100%25 used%0Areally"
    assert "\r" not in line and "%0D" not in message  # the summary is one line: whitespace collapsed
    assert "50%25 of it: gone, see above" in message
    assert "Fix: --x a,b — more: disk." in message
    assert "%" not in message.replace("%25", "")


def test_github_command_escapes_data_and_properties():
    assert command("error", "50% a\r\nb: c, d", file="x,y.log", line=3, title="T: 1, 2%", col=None) == (
        "::error file=x%2Cy.log,line=3,title=T%3A 1%2C 2%25::50%25 a%0D%0Ab: c, d\n"
    )
    assert command("notice", "ok") == "::notice::ok\n"


def test_github_annotation_is_one_line():
    report = _report("failed")  # undiagnosed: the failure message (with a newline) goes into the annotation
    out = render(report, "github")
    title = "vLLM failed to start during profiling (unknown cause)"
    assert out.startswith(f"::error file=startup.log,line=42,title={title}::")
    assert out.count("\n") == 1 and "RuntimeError: something broke at frame 1" in out


def test_github_few_aggregated_annotations():
    lines = render(_report("failed", diagnoses=4), "github").splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == ["::error", "::warning"]
    assert "cause_2" in lines[1] and "cause_3" in lines[1] and "cause_4" in lines[1]
    assert "title=Cause number 1" in lines[0] and "--gpu-memory-utilization 0.85" in lines[0]
    assert render(triage_file(HEALTHY), "github").startswith("::notice ")
    assert render(triage_file(HEALTHY), "github").count("\n") == 1
    assert render(_report("failed", name="<stdin>"), "github").startswith("::error title=")  # no file, no line


def test_github_keeps_remedy_flags_when_the_explanation_is_huge():
    report = _report("failed", diagnoses=[_diagnosis(1, explanation="word " * 5000)])
    line = render(report, "github")
    assert len(line) < 2000 and "--gpu-memory-utilization 0.85" in line and "…" in line


def test_step_summary_gets_the_markdown_appended(tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out = io.StringIO()
    code = main([str(FAILED), "--format", "github"], stdout=out, stderr=io.StringIO())
    assert code == 1
    assert out.getvalue().startswith("::error ")
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("# earlier step\n")
    named = triage_file(FAILED)
    named = named.model_copy(update={"input": named.input.model_copy(update={"name": str(FAILED)})})
    assert render_all([named], "markdown") in text
    assert "## vllm-triage: failed" in text and "--max-model-len" in text


def test_step_summary_only_with_the_github_format(tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert main([str(FAILED), "--format", "json"], stdout=io.StringIO(), stderr=io.StringIO()) == 1
    assert not summary.exists()


def test_step_summary_unwritable_is_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "no" / "such" / "dir.md"))
    err = io.StringIO()
    assert main([str(FAILED), "--format", "github"], stdout=io.StringIO(), stderr=err) == 2
    assert err.getvalue().count("\n") == 1 and "GITHUB_STEP_SUMMARY" in err.getvalue()


# --- JUnit -----------------------------------------------------------------------------------

# A structural subset of the JUnit XSD that Jenkins and GitLab read (no network needed):
# element -> (required attributes, allowed attributes, allowed children).
JUNIT_SCHEMA = {
    "testsuites": ({"tests", "failures"}, {"name", "tests", "failures", "errors", "time", "disabled"}, {"testsuite"}),
    "testsuite": (
        {"name", "tests", "failures", "errors"},
        {
            "name",
            "tests",
            "failures",
            "errors",
            "skipped",
            "time",
            "timestamp",
            "hostname",
            "id",
            "package",
            "disabled",
        },
        {"properties", "testcase", "system-out", "system-err"},
    ),
    "testcase": (
        {"name", "classname"},
        {"name", "classname", "time", "assertions", "status"},
        {"failure", "error", "skipped", "system-out", "system-err"},
    ),
    "failure": (set(), {"message", "type"}, set()),
    "system-out": (set(), set(), set()),
}
INTEGER_ATTRS = {"tests", "failures", "errors", "skipped", "disabled"}


def _check_junit(root: ET.Element) -> None:
    for el in root.iter():
        required, allowed, children = JUNIT_SCHEMA[el.tag]
        assert required <= set(el.attrib) <= allowed, (el.tag, el.attrib)
        assert {child.tag for child in el} <= children, el.tag
        for attr in INTEGER_ATTRS & set(el.attrib):
            assert el.attrib[attr].isdigit()
        if "time" in el.attrib:
            float(el.attrib["time"])
    for suite in [root, *root.iter("testsuite")]:
        cases = list(suite.iter("testcase"))
        assert int(suite.get("tests")) == len(cases)
        assert int(suite.get("failures")) == sum(1 for c in cases if c.find("failure") is not None)


def test_junit_structure_of_a_failed_log():
    report = triage_file(FAILED)
    root = ET.fromstring(render(report, "junit"))
    _check_junit(root)
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "vllm-triage" and suite.get("errors") == "0" and suite.get("skipped") == "0"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [d.id for d in report.diagnoses]
    for case, d in zip(cases, report.diagnoses, strict=True):
        assert case.get("classname") == f"vllm-triage.{report.input.name}"
        failure = case.find("failure")
        assert failure.get("type") == d.id and failure.get("message") == d.title
        assert d.explanation in failure.text
        assert "--max-model-len 25776" in failure.text
        for e in d.evidence:
            assert f"{e.line:>6} | " in failure.text


def test_junit_healthy_and_incomplete_are_one_passing_startup_case():
    for report in (triage_file(HEALTHY), _report("incomplete")):
        root = ET.fromstring(render(report, "junit"))
        _check_junit(root)
        (case,) = root.iter("testcase")
        assert case.get("name") == "startup" and case.find("failure") is None
        assert root.find("testsuite").get("failures") == "0"


def test_junit_undiagnosed_failure_is_one_failing_startup_case():
    root = ET.fromstring(render(_report("failed"), "junit"))
    _check_junit(root)
    (case,) = root.iter("testcase")
    assert case.get("name") == "startup"
    assert case.find("failure").get("type") == "unknown_failure"


def test_junit_env_remedies_and_escaping_round_trip():
    root = ET.fromstring(render(_report("failed", diagnoses=1), "junit"))
    text = root.find(".//failure").text
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in text
    assert "something <failed> & stopped" in text


def test_junit_strips_characters_xml_cannot_hold():
    nasty = "bad\x00byte \x1b[31mred\x1b[0m \x0b\x0c \ud800 \ufffe ok\ttab"
    report = _report("failed", name="a\x01.log", diagnoses=[_diagnosis(1, title=nasty, explanation=nasty)])
    out = render(report, "junit")
    out.encode("utf-8")  # no lone surrogate left
    root = ET.fromstring(out)
    _check_junit(root)
    failure = root.find(".//failure")
    # control characters are shown (the output sanitiser), what XML cannot hold even so is dropped
    assert failure.get("message") == "bad\\x00byte \\x1b[31mred\\x1b[0m \\x0b\\x0c \\ud800 ok tab"
    assert "bad\x00" not in out and "\x1b" not in out and "ok\ttab" in failure.text
    assert root.find(".//testcase").get("classname") == "vllm-triage.a\\x01.log"


def test_junit_several_logs_merge_into_one_document():
    reports = [triage_file(FAILED), triage_file(HEALTHY), triage_file(TWO_CAUSES)]
    root = ET.fromstring(render_all(reports, "junit"))
    _check_junit(root)
    assert len(root.findall("testsuite")) == 1
    expected = sum(max(1, len(r.diagnoses)) for r in reports)
    assert root.get("tests") == str(expected) == root.find("testsuite").get("tests")
    assert {c.get("classname") for c in root.iter("testcase")} == {f"vllm-triage.{r.input.name}" for r in reports}


# --- Slack -----------------------------------------------------------------------------------


def _texts(blocks: list[dict]):
    for block in blocks:
        if "text" in block:
            yield block["type"], block["text"]["text"]
        for element in block.get("elements", []):
            yield block["type"], element["text"]


def test_slack_respects_block_kit_limits():
    huge = "A <b> & c " * 2000
    diagnoses = [
        _diagnosis(
            i, title="T" * 400, explanation=huge, remedies=[Remedy(text="r " * 400, flags={"--flag": "`x`" * 200})] * 20
        )
        for i in range(1, 11)
    ]
    report = _report("failed", name="n" * 300, failure=Failure(line=1, message=huge), diagnoses=diagnoses)
    message = json.loads(render(report, "slack"))
    blocks = message["blocks"]
    assert len(blocks) <= 50
    assert blocks[0]["type"] == "header" and len(blocks[0]["text"]["text"]) <= 150
    assert blocks[0]["text"]["text"].endswith("…")
    assert sum(1 for b in blocks if b["type"] == "section") == 1 + 3  # the failure, then at most 3 causes
    for kind, text in _texts(blocks):
        assert 0 < len(text) <= 3000, kind
        assert not re.search(r"&(?!amp;|lt;|gt;)", text), "a cut went through an entity"
        if kind == "section":
            assert text.count("```") % 2 == 0 and text.replace("```", "").count("`") % 2 == 0
    assert all("…" in text for kind, text in _texts(blocks) if kind == "section")
    assert "7 more possible causes" in blocks[-1]["elements"][0]["text"]
    assert 0 < len(message["text"]) <= 3000


def test_slack_failure_section_and_version_context():
    message = json.loads(render(triage_file(FAILED), "slack"))
    header, failure, context = message["blocks"][:3]
    assert header["type"] == "header" and failure["type"] == "section" and context["type"] == "context"
    assert "kv cache allocation" in failure["text"]["text"] and "line 58" in failure["text"]["text"]
    assert "vLLM 0.9.2" in context["elements"][0]["text"]
    assert "`--max-model-len 25776`" in message["blocks"][4]["text"]["text"]


def test_slack_several_logs_are_one_object_per_line():
    out = render_all([triage_file(FAILED), triage_file(HEALTHY)], "slack")
    lines = out.splitlines()
    assert len(lines) == 2 and all("blocks" in json.loads(line) for line in lines)


# --- the CLI and redaction --------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["github", "junit", "slack"])
def test_cli_accepts_the_ci_formats(fmt, tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    target = tmp_path / f"report.{fmt}"
    code = main(
        [str(FAILED), str(HEALTHY), "--format", fmt, "-o", str(target)], stdout=io.StringIO(), stderr=io.StringIO()
    )
    assert code == 1 and target.read_text(encoding="utf-8").strip()


SECRET_LOG = (
    "INFO 05-02 11:00:00 worker.py:1] Loading model weights took 14.9888 GB\n"
    "INFO 05-02 11:00:00 api_server.py:1] args: hf_token=hf_abcdefghijklmnopqrstuvwxyz0123\n"
    "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be "
    "stored in KV cache (21456). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
    "when initializing the engine. api_key=<your-key>\n"
)


@pytest.mark.parametrize("fmt", ["junit", "slack"])
def test_structured_formats_stay_valid_and_redacted(fmt):
    """The report is redacted in the pipeline; a regex pass over XML/JSON text could break its syntax."""
    report = triage_text(SECRET_LOG)
    out = render_all([report], fmt)
    ET.fromstring(out) if fmt == "junit" else json.loads(out)
    assert "hf_abcdefghijklmnopqrstuvwxyz0123" not in out
