"""The paste page's reading of the JSON report (static/report_view.js), run in Node.

The page builds its DOM from these functions (the DOM itself is tested in Chromium, in
test_server_page.py, where a browser is installed). Here: the Slack text has nothing to
unescape, a facts row is two cells whatever a value holds, the one-line fix is the one the
CLI picks, for the reports of real fixture logs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from importlib import resources

import pytest
from conftest import FIXTURES, run_cli

from triage.model.report import Report
from triage.render.common import best_remedy, command_line

NODE = shutil.which("node")
VIEW = resources.files("triage.apps.serve") / "static" / "report_view.js"
SCRIPT = """
const vm = require("vm");
const fs = require("fs");
const sandbox = {};
vm.createContext(sandbox);
vm.runInContext(fs.readFileSync(process.argv[process.argv.length - 1], "utf8"), sandbox);
const V = sandbox.ReportView;
const reports = JSON.parse(fs.readFileSync(0, "utf8"));
const out = reports.map((r) => ({
  headline: V.headline(r), facts: V.facts(r), slack: V.slack(r),
  best: (r.diagnoses || []).map((d) => { const b = V.bestRemedy(d); return b ? V.command(b) : null; }),
}));
process.stdout.write(JSON.stringify(out));
"""
LOGS = [
    FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log",
    FIXTURES / "kv_cache_insufficient" / "v1-0.10.2-llava7b-16g-relaunch-util095-recovered.log",
    FIXTURES / "cuda_driver_mismatch" / "v092-rtx5090-torch27-cu126-no-kernel-image.log",
    *sorted(FIXTURES.glob("foreign_gpu_processes/*.log"))[:2],
    *sorted(FIXTURES.glob("healthy/*.log"))[:1],
    *sorted(FIXTURES.glob("weights_exceed_memory/*.log"))[:2],
    *sorted(FIXTURES.glob("unknown_failure/*.log"))[:1],
]

pytestmark = pytest.mark.skipif(NODE is None, reason="no `node` on PATH: the page's view functions are run in Node")


def _view(reports: list[dict]) -> list[dict]:
    done = subprocess.run(
        [NODE, "-e", SCRIPT, str(VIEW)], input=json.dumps(reports), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def reports() -> list[dict]:
    return [json.loads(run_cli([str(log), "-f", "json"])[1]) for log in LOGS]


def test_slack_text_has_nothing_to_unescape(reports):
    for report, view in zip(reports, _view(reports), strict=False):
        assert "\\\\" not in view["slack"], view["slack"][:300]
        assert view["slack"].startswith(f"*vllm-triage: {report['outcome']}*")
        for d in report["diagnoses"]:
            assert f"*{d['id']}*" not in view["slack"] and d["id"] in view["slack"]


def test_a_facts_row_is_two_cells_whatever_a_value_holds(reports):
    report = dict(reports[0], facts={**reports[0]["facts"], "model": "org/a|b `x` *y*", "max_model_len": 32768})
    (view,) = _view([report])
    assert all(len(row) == 2 for row in view["facts"])
    assert ["model", "org/a|b `x` *y*"] in view["facts"] and ["max_model_len", "32,768"] in view["facts"]


def test_the_page_offers_the_fix_the_cli_offers(reports):
    for report, view in zip(reports, _view(reports), strict=False):
        model = Report.model_validate(report)
        expected = [command_line(b) if (b := best_remedy(d)) else None for d in model.diagnoses]
        assert view["best"] == expected, report["input"]["name"]


def test_the_headline_names_the_log_and_the_outcome(reports):
    for report, view in zip(reports, _view(reports), strict=False):
        assert view["headline"].startswith(report["input"]["name"])
        assert report["outcome"] in view["headline"]


PAGE = resources.files("triage.apps.serve") / "static" / "page.js"
DOM_SCRIPT = """
// A stand-in DOM, just what page.js uses, to run it in Node where no browser is installed.
const vm = require("vm"), fs = require("fs");
class Node_ {
  constructor(tag) { this.tag = tag; this.children = []; this.listeners = {}; this.className = "";
                     this._text = ""; this.value = ""; this.hidden = false; this.disabled = false; }
  set textContent(t) { this._text = String(t); this.children = []; }
  get textContent() { return this._text + this.children.map((c) => c.textContent).join(""); }
  appendChild(c) { this.children.push(c); return c; }
  append(...cs) { cs.forEach((c) => this.appendChild(c)); }
  replaceChildren(...cs) { this.children = cs; }
  addEventListener(type, fn) { this.listeners[type] = fn; }
  focus() {}
  all() { return [this, ...this.children.flatMap((c) => c.all())]; }
}
const ids = {};
const document = {
  createElement: (tag) => new Node_(tag), createTextNode: (t) => { const n = new Node_("#text"); n.textContent = t; return n; },
  getElementById: (id) => (ids[id] = ids[id] || new Node_("#" + id)), addEventListener: (t, fn) => { document.ready = fn; },
  body: new Node_("body"),
};
const [report, markdown] = JSON.parse(fs.readFileSync(0, "utf8"));
const asked = [];
const fetch = async (url, opts) => { asked.push(url);
  return { ok: true, status: 200, text: async () => (url.includes("markdown") ? markdown : JSON.stringify(report)) }; };
const copied = [];
const sandbox = { document, fetch, navigator: { clipboard: { writeText: async (t) => copied.push(t) } }, FormData: class {} };
sandbox.globalThis = sandbox;
vm.createContext(sandbox);
for (const file of process.argv.slice(-2)) vm.runInContext(fs.readFileSync(file, "utf8"), sandbox);
(async () => {
  document.ready();
  const $ = (id) => document.getElementById(id);
  $("log").value = "a log";
  await $("go").listeners.click();
  await new Promise((r) => setTimeout(r, 0));
  await $("copy-slack").listeners.click();
  await $("copy-md").listeners.click();
  await new Promise((r) => setTimeout(r, 0));
  const nodes = $("report").all();
  process.stdout.write(JSON.stringify({
    asked, copied, status: $("status").textContent, hidden: $("result").hidden, text: $("report").textContent,
    tags: nodes.map((n) => n.tag), rows: nodes.filter((n) => n.tag === "tr").map((tr) => tr.children.length),
    buttons: nodes.filter((n) => n.tag === "button").length,
  }));
})();
"""


def test_the_page_renders_the_json_report_in_a_stand_in_dom(reports):
    report = dict(reports[0], facts={**reports[0]["facts"], "model": "org/a|b"})
    markdown = run_cli([str(LOGS[0]), "-f", "markdown"])[1]
    done = subprocess.run(
        [NODE, "-e", DOM_SCRIPT, str(VIEW), str(PAGE)],
        input=json.dumps([report, markdown]),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["asked"] == ["/v1/triage?format=json", "/v1/triage?format=markdown"]
    assert seen["status"] != "" and not seen["hidden"]
    assert "vllm-triage: failed" in seen["text"] and "max_model_len" in seen["text"] and "\\\\" not in seen["text"]
    assert all(n == 2 for n in seen["rows"]) and "org/a|b" in seen["text"]
    assert seen["buttons"] >= 2  # each remedy's command, and the evidence
    slack, md = seen["copied"]
    assert slack.startswith("*vllm-triage: failed*") and "\\\\" not in slack
    assert md == markdown  # the server's own Markdown, unchanged
