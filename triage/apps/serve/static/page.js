// The paste page: posts the log to /v1/triage and shows the JSON report (report_view.js reads
// it; this file builds the DOM). Every piece of the report is inserted with textContent
// (never as HTML): a log can hold anything, <script> included. The Markdown for "Copy as
// Markdown" is the server's own, asked for once the report is shown. The token lives in this
// closure only: no cookie, no storage.
"use strict";
(() => {
  const View = globalThis.ReportView;
  let token = "";
  let report = null;
  let markdown = null; // a promise of the server's Markdown for the last log
  const $ = (id) => document.getElementById(id);
  const el = (tag, text, cls) => {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (cls) node.className = cls;
    return node;
  };

  function say(text, isError) {
    $("status").textContent = text;
    $("status").className = isError ? "error" : "";
  }

  async function copy(text, what) {
    try {
      await navigator.clipboard.writeText(text);
    } catch (_) { // no clipboard API (plain http on another host): the old way
      const area = el("textarea");
      area.value = text;
      document.body.appendChild(area);
      area.select();
      document.execCommand("copy");
      area.remove();
    }
    say(`${what} copied`);
  }

  function copyButton(text, what) {
    const button = el("button", "copy", "copy");
    button.type = "button";
    button.addEventListener("click", () => copy(text, what));
    return button;
  }

  // A block of text with its copy button in a bar above it: the button never covers the text.
  function block(text, what, summary) {
    const box = el("div", undefined, "block");
    const bar = el("div", undefined, "bar");
    if (summary) bar.appendChild(el("span", summary, "muted"));
    bar.appendChild(copyButton(text, what));
    const pre = el("pre");
    pre.appendChild(el("code", text));
    box.append(bar, pre);
    return box;
  }

  function diagnosis(d, i) {
    const part = el("section", undefined, "diagnosis");
    const head = el("h3", `${i + 1}. ${d.id}`);
    head.appendChild(el("span", ` confidence ${d.confidence.toFixed(2)}`, "muted"));
    part.append(head, el("p", d.title, "title"));
    if (d.explanation) part.appendChild(el("p", d.explanation));
    if ((d.remedies || []).length) {
      part.appendChild(el("h4", "What to change"));
      const list = el("ul");
      for (const r of d.remedies) {
        const item = el("li");
        const cmd = View.command(r);
        if (cmd) {
          const line = el("div", undefined, "command");
          line.append(el("code", cmd), copyButton(cmd, "command"));
          item.appendChild(line);
        }
        item.appendChild(el("span", r.text));
        if (r.check && r.check.text) item.appendChild(el("span", ` (checked: ${r.check.text})`, "muted"));
        list.appendChild(item);
      }
      part.appendChild(list);
    }
    if ((d.evidence || []).length) {
      const details = el("details");
      details.appendChild(el("summary", "Evidence"));
      const width = Math.max(...d.evidence.map((e) => String(e.line).length));
      const text = d.evidence.map((e) => `${String(e.line).padStart(width)} | ${e.text}`).join("\n");
      details.appendChild(block(text, "evidence"));
      part.appendChild(details);
    }
    return part;
  }

  function render(r) {
    const root = el("div");
    root.append(el("h2", `vllm-triage: ${r.outcome}`), el("p", View.headline(r), "headline"));
    (r.diagnoses || []).forEach((d, i) => root.appendChild(diagnosis(d, i)));
    if (!(r.diagnoses || []).length && r.outcome === "failed" && r.failure) {
      root.appendChild(el("p", "No known cause matched. The failure:"));
      root.appendChild(block(r.failure.message, "failure"));
    }
    const rows = View.facts(r);
    if (rows.length) {
      const table = el("table", undefined, "facts");
      const head = el("tr");
      head.append(el("th", "fact"), el("th", "value"));
      table.appendChild(head);
      for (const [label, value] of rows) {
        const tr = el("tr");
        tr.append(el("td", label), el("td", value));
        table.appendChild(tr);
      }
      root.appendChild(table);
    }
    for (const note of r.notes || []) root.appendChild(el("blockquote", note));
    return root;
  }

  async function post(body, contentType, format) {
    const headers = { Accept: format === "markdown" ? "text/markdown" : "application/json" };
    if (contentType) headers["Content-Type"] = contentType;
    if (token) headers.Authorization = `Bearer ${token}`;
    return fetch(`/v1/triage?format=${format}`, { method: "POST", headers, body, credentials: "omit", cache: "no-store" });
  }

  async function analyse(makeBody, contentType) {
    const typed = $("token").value.trim();
    if (typed) { token = typed; $("token").value = ""; }
    say("analysing…");
    $("go").disabled = true;
    try {
      const response = await post(makeBody(), contentType, "json");
      const text = await response.text();
      if (!response.ok) {
        let message = text;
        try { message = JSON.parse(text).error; } catch (_) { /* not JSON: shown as it is */ }
        if (response.status === 401) { token = ""; $("token").focus(); }
        say(`${response.status}: ${message}`, true);
        return;
      }
      $("token-state").textContent = token ? "token kept for this tab" : "";
      report = JSON.parse(text);
      $("report").replaceChildren(render(report));
      $("result").hidden = false;
      say("done");
      markdown = post(makeBody(), contentType, "markdown").then((r) => (r.ok ? r.text() : null)).catch(() => null);
    } catch (err) {
      say(`the request failed: ${err.message}`, true);
    } finally {
      $("go").disabled = false;
    }
  }

  function sendFile(file) {
    analyse(() => { const form = new FormData(); form.append("file", file, file.name); return form; }, null);
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("go").addEventListener("click", () => {
      const text = $("log").value;
      if (!text.trim()) { say("paste a log first", true); return; }
      analyse(() => text, "text/plain; charset=utf-8");
    });
    $("file").addEventListener("change", () => { if ($("file").files[0]) sendFile($("file").files[0]); });
    const drop = $("drop");
    drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
    drop.addEventListener("dragleave", () => drop.classList.remove("over"));
    drop.addEventListener("drop", (e) => {
      e.preventDefault();
      drop.classList.remove("over");
      if (e.dataTransfer.files[0]) sendFile(e.dataTransfer.files[0]);
    });
    $("copy-md").addEventListener("click", async () => {
      const text = markdown && await markdown;
      if (text) copy(text, "Markdown"); else say("the Markdown report is not available", true);
    });
    $("copy-slack").addEventListener("click", () => { if (report) copy(View.slack(report), "Slack text"); });
  });
})();
