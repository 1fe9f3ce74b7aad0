// The API page: /openapi.json as headings and tables, built with textContent only.
"use strict";
(() => {
  const el = (tag, text) => {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const refName = (schema) => (schema && schema.$ref ? schema.$ref.split("/").pop() : "");
  const schemaText = (schema) => {
    if (!schema) return "";
    if (schema.$ref) return refName(schema);
    if (schema.oneOf) return schema.oneOf.map(schemaText).join(" or ");
    return schema.enum ? `${schema.type}: ${schema.enum.join(" | ")}` : schema.type || "object";
  };
  const table = (head, rows) => {
    const t = el("table");
    const tr = el("tr");
    head.forEach((h) => tr.appendChild(el("th", h)));
    t.appendChild(tr);
    rows.forEach((r) => {
      const row = el("tr");
      r.forEach((c) => row.appendChild(el("td", c)));
      t.appendChild(row);
    });
    return t;
  };

  function operation(path, method, op) {
    const section = el("section");
    section.appendChild(el("h2", `${method.toUpperCase()} ${path}`));
    if (op.summary) section.appendChild(el("p", op.summary + (op.security ? " (bearer token)" : "")));
    if (op.parameters && op.parameters.length) {
      section.appendChild(el("h3", "Parameters"));
      section.appendChild(table(["name", "in", "schema"], op.parameters.map((p) => [p.name, p.in, schemaText(p.schema)])));
    }
    if (op.requestBody) {
      section.appendChild(el("h3", "Body"));
      const content = op.requestBody.content || {};
      section.appendChild(table(["media type", "schema"], Object.keys(content).map((m) => [m, schemaText(content[m].schema)])));
    }
    section.appendChild(el("h3", "Answers"));
    const rows = [];
    for (const [status, answer] of Object.entries(op.responses || {})) {
      const content = answer.content || {};
      const media = Object.keys(content).map((m) => `${m} (${schemaText(content[m].schema)})`).join(", ");
      rows.push([status, answer.description || "", media]);
    }
    section.appendChild(table(["status", "when", "body"], rows));
    return section;
  }

  document.addEventListener("DOMContentLoaded", async () => {
    const main = document.getElementById("api");
    try {
      const spec = await (await fetch("/openapi.json", { credentials: "omit" })).json();
      const parts = [el("p", `${spec.info.title} ${spec.info.version}: ${spec.info.description || ""}`)];
      for (const [path, methods] of Object.entries(spec.paths)) {
        for (const [method, op] of Object.entries(methods)) parts.push(operation(path, method, op));
      }
      main.replaceChildren(...parts);
    } catch (err) {
      main.replaceChildren(el("p", `could not read /openapi.json: ${err.message}`));
    }
  });
})();
