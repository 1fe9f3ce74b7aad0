// The paste page's reading of the JSON report (schema_version 1): plain functions from the
// report to strings and rows, no DOM, so they are tested outside a browser too (node).
// The page renders these with textContent only. Nothing here parses Markdown: the report's
// own fields are shown as they are (no escapes to undo, no `|` that splits a table row).
"use strict";
(() => {
  const GIB = 1024 ** 3;
  const gib = (n) => (typeof n === "number" ? `${(n / GIB).toFixed(2)} GiB` : "?");
  const count = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : String(n));
  // The facts a person reads first, in this order, as the Markdown and terminal reports show them.
  const FACTS = [
    ["gpu_total_bytes", "GPU memory", gib], ["gpu_memory_utilization", "gpu_memory_utilization", String],
    ["budget_bytes", "vLLM budget", gib], ["startup_free_bytes", "free at startup", gib],
    ["weights_bytes", "weights", gib], ["activation_peak_bytes", "activation peak", gib],
    ["kv_cache_bytes", "KV cache", gib], ["kv_cache_tokens", "KV cache tokens", count],
    ["max_model_len", "max_model_len", count], ["foreign_bytes", "held by other processes", gib],
    ["tensor_parallel_size", "tensor_parallel_size", String], ["model", "model", String],
  ];
  const flat = (text) => String(text ?? "").split(/\s+/).filter(Boolean).join(" ");

  function headline(report) {
    const v = report.vllm || {};
    const who = [v.version && `vLLM ${v.version}`, v.engine && `(${v.engine.toUpperCase()})`].filter(Boolean).join(" ");
    const f = report.failure;
    const phase = f && f.phase ? ` during ${f.phase.replaceAll("_", " ")}` : "";
    const state = {
      failed: f ? `failed${phase} at line ${f.line}` : "failed",
      recovered: `recovered: an earlier attempt failed${phase}${f ? ` at line ${f.line}` : ""}; the relaunch reached ready`,
      healthy: "healthy: the server reached ready, nothing fatal found",
      incomplete: f ? `incomplete: the log ends inside a traceback${phase} (line ${f.line})`
        : "incomplete: the log stops before the server was ready or failed",
    }[report.outcome] || report.outcome;
    return [report.input && report.input.name, who, state].filter(Boolean).join(" · ");
  }

  function command(remedy) {
    const env = Object.entries(remedy.env || {}).map(([k, v]) => `${k}=${v}`);
    const flags = Object.entries(remedy.flags || {}).map(([k, v]) => `${k} ${v}`.trim());
    return [...env, ...flags].join(" ");
  }

  // As the one-line answers of the CLI: the first remedy checked to fit; when none was
  // checked, the first complete command (no <placeholder>); never a "cannot tell" figure.
  function bestRemedy(diagnosis) {
    const withCommand = (diagnosis.remedies || []).filter((r) => command(r));
    const fits = withCommand.find((r) => r.check && r.check.verdict === "fits");
    if (fits) return fits;
    const complete = (r) => !command(r).includes("<") && !command(r).includes("...");
    if (withCommand.some((r) => r.check)) {
      return withCommand.find((r) => !r.check && !Object.keys(r.flags || {}).length && complete(r)) || null;
    }
    return withCommand.find(complete) || null;
  }

  function facts(report) {
    const have = report.facts || {};
    return FACTS.filter(([key]) => have[key] !== undefined && have[key] !== null)
      .map(([key, label, show]) => [label, show(have[key])]);
  }

  // Slack's mrkdwn, from the report's fields: *bold*, `code`, bullets; nothing to unescape.
  function slack(report) {
    const out = [`*vllm-triage: ${report.outcome}*`, headline(report)];
    (report.diagnoses || []).forEach((d, i) => {
      out.push("", `*${i + 1}. ${d.id}* (confidence ${d.confidence.toFixed(2)}): ${flat(d.title)}`);
      if (d.explanation) out.push(flat(d.explanation));
      for (const r of d.remedies || []) {
        const cmd = command(r);
        out.push(`• ${cmd ? `\`${cmd}\` ` : ""}${flat(r.text)}`);
      }
    });
    if (!(report.diagnoses || []).length && report.outcome === "failed" && report.failure) {
      out.push("", "No known cause matched:", "```", report.failure.message, "```");
    }
    const rows = facts(report);
    if (rows.length) out.push("", ...rows.map(([label, value]) => `${label}: ${value}`));
    for (const note of report.notes || []) out.push(`> ${flat(note)}`);
    return out.join("\n");
  }

  globalThis.ReportView = { headline, command, bestRemedy, facts, slack, gib };
})();
