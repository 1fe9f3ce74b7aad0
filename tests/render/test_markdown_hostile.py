"""Log text in Markdown (PR comments, the GitHub job summary) stays text: no HTML, links or mentions.

A report is built with hostile text in every field that quotes the log (the name, the
failure, the downstream echoes, a diagnosis's title, explanation, remedies and evidence,
the facts, the notes), rendered, then parsed with a CommonMark + tables parser: nothing of
the log may come out as an element, and the facts table keeps two cells per row.
"""

from __future__ import annotations

import io
import re

from conftest import FIXTURES
from markdown_it import MarkdownIt

from triage.apps.cli import main
from triage.model.report import Diagnosis, Echo, Evidence, Failure, InputInfo, Remedy, Report
from triage.render.markdown import code, render, text

HOSTILE = (
    "<img src=x onerror=alert(1)> </details> [link](https://evil.example) ![i](https://evil.example/i.png) "
    "@octo-org/team | cell | `code` ``two`` *em* _em_ ~~del~~ &amp; <script>x</script> $x$"
)
FENCE_BREAKER = "```\n</details>\n<img src=x onerror=alert(2)>"


def hostile_report() -> Report:
    evidence = [
        Evidence(line=7, text=f"ERROR 06-02 05:17:18 [core.py:387] {HOSTILE}", origin="EngineCore <b>"),
        Evidence(line=8, text=FENCE_BREAKER.replace("\n", " ")),
    ]
    diagnosis = Diagnosis(
        id="unknown_failure",
        title=f"Title {HOSTILE}",
        confidence=0.5,
        explanation=f"Because {HOSTILE}",
        evidence=evidence,
        remedies=[Remedy(text=f"fix {HOSTILE}", flags={"--model": HOSTILE}, env={"X": "`a`"})],
    )
    return Report(
        input=InputInfo(name=f"node|1/{HOSTILE}.log", lines=9, bytes=100),
        outcome="failed",
        failure=Failure(
            line=8,
            message=f"{FENCE_BREAKER}\n{HOSTILE}",
            origin="x",
            downstream=[Echo(line=9, origin=f"o {HOSTILE}", message=f"m {HOSTILE}")],
        ),
        facts={"model": HOSTILE, "max_model_len": 4096},
        diagnoses=[diagnosis],
        notes=[f"note {HOSTILE}"],
    )


def html_of(markdown: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(markdown)


def outside_code(html: str) -> str:
    """GitHub links no @mention inside code; everywhere else one would notify people."""
    return re.sub(r"<code>.*?</code>", "", html, flags=re.S)


def test_no_log_text_becomes_markup():
    html = html_of(render(hostile_report()))
    assert "<img" not in html and "<script" not in html and "<a " not in html and "<em>" not in html
    assert "<b>" not in html and "<s>" not in html and "<del>" not in html
    assert html.count("<details>") == 1 and html.count("</details>") == 1  # ours, and only ours
    assert "@octo-org" not in outside_code(html)  # the mention is broken by a zero-width space
    assert "onerror=alert(1)" in html  # still there, as text


def test_code_spans_and_blocks_hold_any_backticks():
    html = html_of(render(hostile_report()))
    blocks = re.findall(r"<pre><code>(.*?)</code></pre>", html, flags=re.S)
    assert len(blocks) == 2  # the failure, the evidence: no fence closed early
    assert "&lt;/details&gt;" in blocks[0] and "```" in blocks[0]
    assert html_of(code("a ``b`` c")).count("<code>") == 1


def test_the_facts_table_keeps_two_cells_per_row():
    html = html_of(render(hostile_report()))
    rows = re.findall(r"<tr>(.*?)</tr>", html, flags=re.S)
    assert len(rows) == 3 and all(row.count("<td>") + row.count("<th>") == 2 for row in rows)


def test_text_escapes_line_start_markup():
    for hostile in ("# heading", "- item", "1. item", "> quote", "=== setext", "+ item"):
        assert "<p>" in html_of(text(hostile)), hostile


def test_the_step_summary_of_a_hostile_log(tmp_path, monkeypatch):
    """End to end: a log whose model name and error hold markup, through -f github into the summary."""
    base = (FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log").read_text()
    log = tmp_path / "evil.log"
    log.write_text(
        base.replace("Qwen/Qwen2.5-14B-Instruct", "x/<img src=x onerror=alert(1)>|@octo-org [a](https://e.x)")
    )
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert main([str(log), "-f", "github"], stdout=io.StringIO(), stderr=io.StringIO()) == 1
    html = html_of(summary.read_text(encoding="utf-8"))
    assert "<img" not in html and "<a " not in html and "@octo-org" not in outside_code(html)
    rows = re.findall(r"<tr>(.*?)</tr>", html, flags=re.S)
    assert rows and all(row.count("<td>") + row.count("<th>") == 2 for row in rows)
