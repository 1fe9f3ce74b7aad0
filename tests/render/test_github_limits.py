"""GitHub's limits: at most 10 annotations per step, a step summary under 1 MiB."""

from __future__ import annotations

import io

from conftest import FIXTURES, triage_file

from triage.apps.cli import main
from triage.apps.output import render_all
from triage.render.github import MAX_ANNOTATIONS
from triage.render.step_summary import LIMIT_BYTES, append_step_summary, summary_text

FAILED = FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"
TWO_CAUSES = FIXTURES / "foreign_gpu_processes" / "v0-0.6.6-h100-kv-alloc-oom-other-process-18g.log"
HEALTHY = FIXTURES / "healthy" / "v1-0.8.5-llama8b-h100-ctrl-c-shutdown-traceback.log"


def named(path, name):
    report = triage_file(path)
    return report.model_copy(update={"input": report.input.model_copy(update={"name": name})})


def annotations(text: str) -> list[str]:
    lines = text.splitlines()
    assert all(line.startswith("::") for line in lines)
    return lines


def test_many_failing_logs_give_nine_annotations_and_one_for_the_rest():
    reports = [named(FAILED, f"node{i}/vllm.log") for i in range(30)] + [named(HEALTHY, "ok.log")]
    lines = annotations(render_all(reports, "github"))
    assert len(lines) == MAX_ANNOTATIONS
    assert all(line.startswith("::error file=node") for line in lines[:9])
    assert "22 more logs: 21 failed, 1 healthy" in lines[9] and "kv_cache_insufficient x21" in lines[9]


def test_logs_with_several_causes_fold_the_others_into_their_error():
    reports = [named(TWO_CAUSES, f"n{i}.log") for i in range(6)]  # 12 annotations unfolded
    lines = annotations(render_all(reports, "github"))
    assert len(lines) == 6 and all("Also possible: gpu_memory_utilization_too_high" in line for line in lines)


def test_few_logs_keep_every_annotation():
    reports = [named(TWO_CAUSES, "a.log"), named(FAILED, "b.log"), named(HEALTHY, "c.log")]
    lines = annotations(render_all(reports, "github"))
    assert [line.split(" ", 1)[0] for line in lines] == ["::error", "::warning", "::error", "::notice"]


def test_passing_logs_beyond_the_limit_are_counted():
    reports = [named(HEALTHY, f"h{i}.log") for i in range(25)]
    lines = annotations(render_all(reports, "github"))
    assert len(lines) == 1 and lines[0].startswith("::notice") and "25 more logs: 25 healthy" in lines[0]


def test_the_cli_caps_annotations(tmp_path):
    paths = []
    for i in range(12):
        (tmp_path / f"n{i}").mkdir()
        target = tmp_path / f"n{i}" / "vllm.log"
        target.write_bytes(FAILED.read_bytes())
        paths.append(str(target))
    out = io.StringIO()
    assert main([*paths, "-f", "github"], stdout=out, stderr=io.StringIO()) == 1
    assert len(annotations(out.getvalue())) == MAX_ANNOTATIONS


def test_the_step_summary_stays_under_1_mib_and_says_what_was_cut(tmp_path):
    report = triage_file(FAILED)
    huge = report.model_copy(update={"failure": report.failure.model_copy(update={"message": "x " * 400_000})})
    reports = [named(FAILED, f"node{i}.log") for i in range(600)] + [huge]
    summary = tmp_path / "summary.md"
    summary.write_text("# an earlier step\n" * 100, encoding="utf-8")
    append_step_summary(str(summary), reports)
    data = summary.read_bytes()
    assert len(data) < LIMIT_BYTES
    text = data.decode("utf-8")
    assert "reports left out to keep the step summary under GitHub's 1 MiB limit" in text
    assert "## vllm-triage: failed" in text and text.startswith("# an earlier step\n")


def test_a_report_too_big_alone_is_shortened_not_dropped():
    report = triage_file(FAILED)
    huge = report.model_copy(update={"failure": report.failure.model_copy(update={"message": "y" * 200_000})})
    text = summary_text([huge], 100_000)
    assert "characters cut" in text and "left out" not in text and "--max-model-len" in text
