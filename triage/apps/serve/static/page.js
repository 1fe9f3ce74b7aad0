// The paste page: posts the log to /v1/triage and shows the Markdown report as HTML.
// Every piece of the report is inserted with textContent (never as HTML): a log can hold
// anything, <script> included. The token lives in this closure only: no cookie, no storage.
"use strict";
(() => {
  let token = "";
  let markdown = "";
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

  // `code` spans and **bold** of one Markdown line, as nodes; commands get a copy button.
  function inline(parent, text, copyCode) {
    for (const piece of text.split(/(`[^`]*`|\*\*[^*]+\*\*)/)) {
      if (piece.startsWith("`") && piece.endsWith("`") && piece.length > 1) {
        const code = piece.slice(1, -1);
        parent.appendChild(el("code", code));
        if (copyCode) parent.appendChild(copyButton(code, "command"));
      } else if (piece.startsWith("**") && piece.endsWith("**") && piece.length > 3) {
        parent.appendChild(el("strong", piece.slice(2, -2)));
      } else if (piece) {
        parent.appendChild(document.createTextNode(piece));
      }
    }
  }

  function cells(line) {
    return line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
  }

  // The subset of Markdown the report uses: headings, fences, lists, tables, quotes, <details>.
  function render(text) {
    const root = el("div");
    const stack = [root];
    const top = () => stack[stack.length - 1];
    const lines = text.split("\n");
    let list = null;
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      if (!line.startsWith("- ")) list = null;
      if (line.startsWith("```")) {
        const body = [];
        for (i++; i < lines.length && !lines[i].startsWith("```"); i++) body.push(lines[i]);
        const block = el("div", undefined, "block");
        const pre = el("pre");
        pre.appendChild(el("code", body.join("\n")));
        block.append(pre, copyButton(body.join("\n"), "block"));
        top().appendChild(block);
      } else if (line.startsWith("### ")) {
        top().appendChild(el("h3", line.slice(4)));
      } else if (line.startsWith("## ")) {
        top().appendChild(el("h2", line.slice(3)));
      } else if (/^<details><summary>.*<\/summary>$/.test(line)) {
        const details = el("details");
        details.appendChild(el("summary", line.replace(/^<details><summary>/, "").replace(/<\/summary>$/, "")));
        top().appendChild(details);
        stack.push(details);
      } else if (line === "</details>") {
        if (stack.length > 1) stack.pop();
      } else if (line.startsWith("- ")) {
        if (!list) { list = el("ul"); top().appendChild(list); }
        const item = el("li");
        inline(item, line.slice(2), true);
        list.appendChild(item);
      } else if (line.startsWith("|")) {
        const table = el("table");
        const head = cells(line);
        const row = el("tr");
        head.forEach((c) => row.appendChild(el("th", c)));
        table.appendChild(row);
        for (; i + 1 < lines.length && lines[i + 1].startsWith("|"); i++) {
          if (/^\|[-| ]+\|$/.test(lines[i + 1])) continue;
          const tr = el("tr");
          cells(lines[i + 1]).forEach((c) => tr.appendChild(el("td", c)));
          table.appendChild(tr);
        }
        top().appendChild(table);
      } else if (line.startsWith("> ")) {
        top().appendChild(el("blockquote", line.slice(2)));
      } else if (line.trim()) {
        const p = el("p");
        inline(p, line, false);
        top().appendChild(p);
      }
    }
    return root;
  }

  // Slack's mrkdwn: *bold* headings, no HTML, table rows as "name: value".
  function forSlack(text) {
    const out = [];
    let fenced = false;
    for (const line of text.split("\n")) {
      if (line.startsWith("```")) fenced = !fenced;
      if (fenced || line.startsWith("```")) { out.push(line); continue; }
      if (/^<\/?details>|^<details>/.test(line) || /^\|[-| ]+\|$/.test(line) || line === "| fact | value |") continue;
      if (/^#{2,3} /.test(line)) { out.push(`*${line.replace(/^#+ /, "")}*`); continue; }
      if (line.startsWith("|")) { out.push(cells(line).join(": ")); continue; }
      out.push(line.replace(/\*\*([^*]+)\*\*/g, "*$1*").replace(/^- /, "• "));
    }
    return out.join("\n").replace(/\n{3,}/g, "\n\n");
  }

  async function analyse(body, contentType) {
    const typed = $("token").value.trim();
    if (typed) { token = typed; $("token").value = ""; }
    const headers = { Accept: "text/markdown" };
    if (contentType) headers["Content-Type"] = contentType;
    if (token) headers.Authorization = `Bearer ${token}`;
    say("analysing…");
    $("go").disabled = true;
    try {
      const response = await fetch("/v1/triage?format=markdown", {
        method: "POST", headers, body, credentials: "omit", cache: "no-store",
      });
      const text = await response.text();
      if (!response.ok) {
        let message = text;
        try { message = JSON.parse(text).error; } catch (_) { /* not JSON: shown as it is */ }
        if (response.status === 401) { token = ""; $("token").focus(); }
        say(`${response.status}: ${message}`, true);
        return;
      }
      $("token-state").textContent = token ? "token kept for this tab" : "";
      markdown = text;
      $("report").replaceChildren(render(text));
      $("result").hidden = false;
      say("done");
    } catch (err) {
      say(`the request failed: ${err.message}`, true);
    } finally {
      $("go").disabled = false;
    }
  }

  function sendFile(file) {
    const form = new FormData();
    form.append("file", file, file.name);
    analyse(form, null);
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("go").addEventListener("click", () => {
      const text = $("log").value;
      if (!text.trim()) { say("paste a log first", true); return; }
      analyse(text, "text/plain; charset=utf-8");
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
    $("copy-md").addEventListener("click", () => copy(markdown, "Markdown"));
    $("copy-slack").addEventListener("click", () => copy(forSlack(markdown), "Slack text"));
  });
})();
