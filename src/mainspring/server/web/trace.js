// The trace inspector: the server's recent runs, and per model call what was sent and cached.
"use strict";

(function () {
  const { el } = window.MS;
  const list = document.getElementById("runs");
  const search = document.getElementById("run-search");
  const pane = document.getElementById("run");
  let selected = null;
  let timer = null;
  let live = null; // re-reads a run still running

  const int = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));
  const pct = (x) => (x === null || x === undefined ? "–" : (100 * x).toFixed(1) + "%");
  const usd = (x) => (x === null || x === undefined ? "–" : "$" + Number(x).toFixed(6));
  const when = (t) => (t ? new Date(t * 1000).toLocaleTimeString() : "–");

  function rail(status) {
    window.MS.setStatus(status);
  }

  async function loadRuns() {
    if (!window.MS.key()) return;
    try {
      const q = search.value.trim();
      const body = await window.MS.apiJson("/v1/trace/runs?limit=200&q=" + encodeURIComponent(q));
      list.replaceChildren(...body.runs.map(runButton));
      rail(body.runs.length + (body.runs.length === 1 ? " run" : " runs") + (q ? " matching" : "") + (body.include_content ? " · raw text kept" : " · figures only"));
      if (!selected && body.runs.length) select(body.runs[0].run_id);
    } catch (err) {
      rail(err.message);
    }
  }

  function runButton(run) {
    const label = run.kind + " · " + run.status + (run.stop_reason ? " (" + run.stop_reason.replace(/_/g, " ") + ")" : "");
    const button = el("button", { type: "button", "data-run": run.run_id, "aria-current": run.run_id === selected ? "true" : "false" }, [
      el("div", { text: label }),
      el("div", { className: "line2", text: when(run.started_at) + " · " + run.calls + " calls · " + int(run.tokens) + " tok · " + usd(run.cost_usd) }),
      el("div", { className: "line2 mono", text: "session " + run.session_id.slice(0, 8) + (run.tools.length ? " · " + run.tools.join(", ") : "") }),
    ]);
    button.addEventListener("click", () => select(run.run_id));
    return el("li", {}, [button]);
  }

  async function select(runId) {
    selected = runId;
    for (const b of list.querySelectorAll("button[data-run]")) b.setAttribute("aria-current", String(b.dataset.run === runId));
    try {
      const detail = await window.MS.apiJson("/v1/trace/runs/" + encodeURIComponent(runId));
      render(detail);
    } catch (err) {
      pane.replaceChildren(el("p", { className: "status error", role: "alert", text: err.message }));
    }
  }

  function figures(items) {
    return el("dl", { className: "figures" }, items.map(([label, value, field]) =>
      el("div", {}, [el("dt", { text: label }), el("dd", { "data-field": field, text: value })])));
  }

  function table(caption, head, rows, numericFrom) {
    // A region of its own that scrolls sideways on a narrow screen (and by keyboard).
    const wrap = el("div", { className: "table-wrap", role: "region", "aria-label": caption, tabindex: 0 });
    wrap.append(bareTable(caption, head, rows, numericFrom));
    return wrap;
  }

  function bareTable(caption, head, rows, numericFrom) {
    return el("table", {}, [
      el("caption", { text: caption }),
      el("thead", {}, [el("tr", {}, head.map((h, i) => el("th", { scope: "col", className: i >= numericFrom ? "num" : null, text: h })))]),
      el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c, i) => (c instanceof Node ? el("td", {}, [c]) : el("td", { className: i >= numericFrom ? "num" : null, text: c })))))),
    ]);
  }

  function composition(caption, rows) {
    return table(caption, ["name", "share", "tokens", "%", "cost"], rows.map((r) => [
      r.name,
      el("span", { className: "share", style: null, "aria-hidden": "true", "data-w": Math.round(100 * r.share) }),
      int(r.tokens),
      pct(r.share),
      usd(r.cost_usd),
    ]), 2);
  }

  function callSection(call) {
    const section = el("section", { className: "call", "data-call": call.index, "aria-labelledby": "call-" + call.index });
    section.append(el("h3", { id: "call-" + call.index, text: "Call " + (call.index + 1) + " · turn " + call.turn_index + " step " + call.step + " · " + call.model }));
    section.append(figures([
      ["tokens sent", int(call.tokens), "tokens"],
      ["stable prefix", int(call.stable_tokens), "stable_tokens"],
      ["cache read", int(call.cache_read_tokens), "cache_read_tokens"],
      ["cache write", int(call.cache_write_tokens), "cache_write_tokens"],
      ["cache hit rate", pct(call.cache_hit_rate), "cache_hit_rate"],
      ["prefix reuse", pct(call.prefix_reuse), "prefix_reuse"],
      ["cost", usd(call.cost_usd), "cost_usd"],
      ["tokenizer", call.tokenizer + (call.exact ? "" : " (estimate)"), "tokenizer"],
    ]));
    section.append(el("div", { className: "tables" }, [
      composition("By source", call.by_source),
      composition("By module", call.by_module),
      composition("By processor", call.by_processor),
    ]));
    const bp = call.breakpoint_after_segment;
    section.append(el("h4", { text: "Prompt blueprint" + (bp === null ? " (no cache breakpoint)" : " · cache breakpoint after segment " + (bp + 1)) }));
    section.append(el("ol", { className: "blueprint" }, call.segments.map((s) => {
      const cls = [s.stable ? "stable" : "", s.reused ? "reused" : "", s.index === bp ? "breakpoint" : ""].join(" ").trim();
      const line = el("li", { className: cls || null }, [
        el("span", { className: "mono", text: s.source + " ← " + s.module + "/" + s.processor + " [" + s.slot + "]" }),
        " " + int(s.tokens) + " tok · " + pct(s.share) + (s.stable ? " · stable" : ""),
      ]);
      if (s.content !== undefined) line.append(el("pre", { text: s.content }));
      return line;
    })));
    return section;
  }

  function activityRows(items) {
    return items.map((a) => {
      const bits = [];
      for (const k of ["phase", "seconds", "is_error", "chars", "reason", "attempt", "wait_seconds", "generation", "level", "title", "retryable"]) {
        if (a[k] !== undefined && a[k] !== null && a[k] !== "") bits.push(k + "=" + a[k]);
      }
      if (a.keys) bits.push("keys=" + a.keys.join(","));
      if (a.data) bits.push(JSON.stringify(a.data));
      if (a.content) bits.push(a.content);
      return [a.at.toFixed(3) + " s", a.kind, a.name, bits.join(" · ")];
    });
  }

  function render(detail) {
    const s = detail.summary;
    const nodes = [
      el("h2", { text: "Run " + s.run_id.slice(0, 8) + " · " + s.kind + " · " + s.status }),
      el("p", { className: "muted mono", text: "session " + s.session_id + " · stream " + (s.stream_id || "–") }),
      figures([
        ["model calls", int(s.calls), "calls"],
        ["tokens sent", int(s.tokens), "tokens"],
        ["cost", usd(s.cost_usd), "cost_usd"],
        ["cache hit rate", pct(s.cache_hit_rate), "cache_hit_rate"],
        ["events", int(s.events), "events"],
        ["stop", s.stop_reason || "–", "stop_reason"],
      ]),
    ];
    const json = el("button", { type: "button", text: "Export JSON" });
    json.addEventListener("click", () => download("/v1/trace/runs/" + encodeURIComponent(s.run_id), "run-" + s.run_id + ".json"));
    const html = el("button", { type: "button", text: "Export HTML report" });
    html.addEventListener("click", () => download("/v1/trace/runs/" + encodeURIComponent(s.run_id) + "/report", "run-" + s.run_id + ".html"));
    nodes.push(el("div", { className: "exports" }, [json, html]));
    if (!detail.include_content) nodes.push(el("p", { className: "muted", text: "Raw text is not kept by this server (ServerConfig(trace_content=True) keeps it)." }));
    nodes.push(el("h3", { text: "Model calls" }));
    if (!detail.calls.length) nodes.push(el("p", { className: "muted", text: "No model call was recorded for this run." }));
    for (const call of detail.calls) nodes.push(callSection(call));
    nodes.push(el("h3", { text: "Prefix mutations" }));
    nodes.push(detail.prefix_mutations.length
      ? table("Prefix changes", ["at", "kind", "what", "detail"], activityRows(detail.prefix_mutations), 9)
      : el("p", { className: "muted", "data-field": "prefix_mutations", text: "None: every call extended the previous prefix." }));
    nodes.push(el("h3", { text: "Activities" }));
    nodes.push(table("Tools, retries, rate limits and events", ["at", "kind", "name", "detail"], activityRows(detail.activities), 9));
    if (s.dropped_activities) nodes.push(el("p", { className: "muted", text: s.dropped_activities + " older activities were dropped." }));
    pane.replaceChildren(...nodes);
    clearTimeout(live);
    if (s.status === "running") live = setTimeout(() => selected === s.run_id && select(s.run_id), 1500);
    for (const bar of pane.querySelectorAll(".share[data-w]")) bar.style.width = Math.max(1, Number(bar.dataset.w)) / 20 + "rem";
  }

  async function download(path, name) {
    try {
      const response = await window.MS.api(path);
      const blob = await response.blob();
      const url = URL.createObjectURL(blob);
      const a = el("a", { href: url, download: name });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
    } catch (err) {
      rail(err.message);
    }
  }

  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(loadRuns, 200);
  });
  document.getElementById("refresh").addEventListener("click", () => {
    loadRuns();
    if (selected) select(selected);
  });
  search.value = new URL(window.location.href).searchParams.get("q") || "";
  window.MS.setupKeyForm(loadRuns);
  loadRuns();
})();
