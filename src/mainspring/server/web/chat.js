// The chat page: a session's turns streamed as they come, approvals on confirm cards.
//
// The tab keeps its session id and every event it has shown (with its stream
// position) in sessionStorage: a reload draws them again and follows the
// stream from the last position, so nothing is lost or shown twice.
//
// Replies are Markdown (markdown.js), re-rendered at most once a frame while
// they stream. A message typed while a turn runs is queued (kept in the tab's
// storage too) and sent when the turn ends; Stop cancels the running turn.
// The page follows the newest text only while the reader is at the bottom.
"use strict";

(function () {
  const STORE = "mainspring.chat";
  const { el } = window.MS;
  const transcript = document.getElementById("transcript");
  const composer = document.getElementById("composer");
  const input = document.getElementById("composer-input");
  const stopButton = document.getElementById("stop");
  const queueList = document.getElementById("queue");
  const composerNote = document.getElementById("composer-note");
  const announcer = document.getElementById("announce");
  const jump = document.getElementById("jump");
  const markdown = window.MS.markdown;

  let state = load();
  let busy = false;
  let view = null; // the assistant block events are drawn into

  // Tools the page itself carries out (client-executed tools), by name.
  const clientTools = {
    // The demo: "sign" a payment in the browser (a SHA-256 over its fields).
    async sign_payment(args) {
      const canonical = JSON.stringify(args, Object.keys(args).sort());
      const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(canonical));
      const hex = Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
      return JSON.stringify({ signed: true, by: "browser", signature: hex });
    },
  };
  window.mainspringClientTools = clientTools;

  function load() {
    try {
      const raw = sessionStorage.getItem(STORE);
      if (raw) {
        const stored = JSON.parse(raw);
        if (!Array.isArray(stored.queue)) stored.queue = [];
        return stored;
      }
    } catch (_) {
      /* a bad entry: start over */
    }
    return fresh();
  }

  function fresh() {
    return { session: null, log: [], last: null, queue: [] };
  }

  function save() {
    sessionStorage.setItem(STORE, JSON.stringify(state));
    const trace = document.querySelector("nav a[href^='/trace']");
    if (trace) trace.href = state.session ? "/trace?q=" + encodeURIComponent(state.session) : "/trace";
  }

  function status(text, isError) {
    window.MS.setStatus(text, isError);
  }

  function setBusy(value) {
    busy = value;
    stopButton.hidden = !value;
    stopButton.disabled = false;
    document.body.dataset.busy = String(value);
  }

  function tell(text) {
    composerNote.textContent = text;
  }

  // ------------------------------------------------------------ scrolling

  // Follow the newest text only while the reader is at the bottom: scrolling
  // up stops it (and offers "Jump to latest"); reaching the bottom again resumes it.
  let following = true;

  function atBottom() {
    return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 48;
  }

  function scrollDown() {
    following = true;
    jump.hidden = true;
    window.scrollTo(0, document.documentElement.scrollHeight);
  }

  function grew() {
    if (following) scrollDown();
    else jump.hidden = false;
  }

  window.addEventListener("scroll", () => {
    following = atBottom();
    if (following) jump.hidden = true;
  }, { passive: true });
  jump.addEventListener("click", () => {
    scrollDown();
    input.focus();
  });

  // ------------------------------------------------------------ drawing

  // Text blocks waiting to be rendered: at most once a frame while streaming,
  // at once at a boundary (a tool call, the turn's end) and on a redraw. A
  // render re-parses the block's whole text (a 20 KB reply takes milliseconds),
  // so after each one the page waits three times what it cost before the next:
  // rendering never takes more than a quarter of the main thread.
  const sources = new WeakMap();
  const dirty = new Set();
  let frame = 0;
  let timer = 0;
  let quietUntil = 0;

  function renderNow() {
    if (frame) cancelAnimationFrame(frame);
    if (timer) clearTimeout(timer);
    frame = 0;
    timer = 0;
    const started = performance.now();
    for (const node of dirty) markdown.render(node, sources.get(node) || "");
    dirty.clear();
    const now = performance.now();
    quietUntil = now + 3 * (now - started);
  }

  function onFrame() {
    frame = requestAnimationFrame(() => {
      frame = 0;
      renderNow();
      grew();
    });
  }

  function renderSoon(node) {
    dirty.add(node);
    if (frame || timer) return;
    const wait = quietUntil - performance.now();
    if (wait > 0) {
      timer = setTimeout(() => {
        timer = 0;
        onFrame();
      }, wait);
    } else {
      onFrame();
    }
  }

  function userMessage(text) {
    transcript.append(el("li", { className: "msg user" }, [el("span", { className: "visually-hidden", text: "You: " }), text]));
  }

  function block() {
    if (!view) {
      const node = el("li", { className: "msg assistant", "aria-label": "Assistant" });
      transcript.append(node);
      view = { node: node, text: null, thinking: null, tools: {} };
    }
    return view;
  }

  function textNode() {
    const v = block();
    if (!v.text) {
      v.text = el("div", { className: "text" });
      v.node.append(v.text);
    }
    return v.text;
  }

  function draw(ev, live) {
    const v = block();
    switch (ev.type) {
      case "stream_started":
        break;
      case "text_delta": {
        const node = textNode();
        sources.set(node, (sources.get(node) || "") + ev.text);
        if (live) renderSoon(node);
        else dirty.add(node);
        break;
      }
      case "thinking_delta": {
        if (!v.thinking) {
          v.thinking = el("details", { className: "thinking", open: true }, [el("summary", { text: "Thinking" }), el("div")]);
          v.node.append(v.thinking);
        }
        v.thinking.lastChild.append(ev.text);
        break;
      }
      case "thinking_done":
        if (v.thinking) v.thinking.open = false;
        v.thinking = null;
        break;
      case "tool_call_delta":
        break;
      case "tool_start": {
        renderNow();
        const box = el("div", { className: "tool", "data-tool": ev.name }, [
          el("span", { className: "name", text: ev.name }),
          el("code", { text: " " + JSON.stringify(ev.input) }),
          el("div", { className: "progress" }),
          el("pre", { className: "result" }),
        ]);
        v.tools[ev.tool_use_id] = box;
        v.node.append(box);
        v.text = null;
        break;
      }
      case "tool_progress": {
        const box = v.tools[ev.tool_use_id];
        if (!box) break;
        const line = box.querySelector(".progress");
        line.replaceChildren(ev.message + " ");
        if (ev.pct !== null && ev.pct !== undefined) {
          line.append(el("progress", { max: 100, value: ev.pct, "aria-label": ev.name + " progress" }));
        }
        break;
      }
      case "tool_result": {
        let box = v.tools[ev.tool_use_id];
        if (!box) {
          box = el("div", { className: "tool", "data-tool": ev.name }, [el("span", { className: "name", text: ev.name }), el("pre", { className: "result" })]);
          v.node.append(box);
        }
        box.classList.toggle("error", ev.is_error);
        // The tool is done: a progress bar it left shows the end, not where it stopped.
        for (const bar of box.querySelectorAll("progress")) bar.value = bar.max;
        box.querySelector(".result").textContent = (ev.is_error ? "error: " : "→ ") + ev.content;
        v.text = null;
        break;
      }
      case "canvas":
        v.node.append(canvas(ev));
        v.text = null;
        break;
      case "pending_action":
        v.node.append(card(ev, live));
        v.text = null;
        break;
      case "usage":
        break;
      case "turn_complete": {
        renderNow();
        if (live) announce(v.node, ev.stop_reason);
        const cost = ev.cost_usd ? " · $" + ev.cost_usd.toFixed(4) : "";
        v.node.append(el("p", { className: "turn-end", "data-stop": ev.stop_reason, text: "turn " + ev.turn_index + ": " + ev.stop_reason.replace(/_/g, " ") + cost }));
        view = null;
        break;
      }
      case "error":
        renderNow();
        v.node.append(el("p", { className: "error-msg", role: "alert", text: waiting(ev.message) ? WAITING : "Error (" + ev.code + "): " + ev.message }));
        view = null;
        break;
      default:
        break;
    }
  }

  // The live region hears each finished reply once (never token by token).
  function announce(node, stopReason) {
    const text = Array.from(node.querySelectorAll(".text"), (t) => t.textContent.trim()).filter(Boolean).join(" ");
    const said = text.length > 600 ? text.slice(0, 600) + "…" : text;
    const how = stopReason === "end_turn" ? "" : " (" + stopReason.replace(/_/g, " ") + ")";
    announcer.textContent = "Assistant replied" + how + ": " + (said || "no text");
  }

  function canvas(ev) {
    // Sandboxed without allow-same-origin (and without scripts): the content
    // cannot reach this page, its storage or its credential.
    const frame = el("iframe", { sandbox: "", title: ev.title || "canvas: " + ev.kind, referrerpolicy: "no-referrer" });
    const body = ev.kind === "html" && typeof ev.data === "string"
      ? ev.data
      : "<pre>" + escapeHtml(JSON.stringify(ev.data, null, 2)) + "</pre>";
    frame.srcdoc = "<!doctype html><meta charset=utf-8><body>" + body;
    return el("figure", { className: "canvas" }, [frame, el("figcaption", { className: "muted", text: ev.title || ev.kind })]);
  }

  function escapeHtml(text) {
    return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }

  // ------------------------------------------------------------ the card

  function fieldInput(name, value, id) {
    if (typeof value === "number") {
      return el("input", { id: id, name: name, type: "number", step: "any", value: String(value) });
    }
    if (typeof value === "boolean") {
      const box = el("input", { id: id, name: name, type: "checkbox" });
      box.checked = value;
      return box;
    }
    if (typeof value === "string" || value === null || value === undefined) {
      return el("input", { id: id, name: name, type: "text", value: value === null || value === undefined ? "" : value });
    }
    return el("textarea", { id: id, name: name, rows: 3, text: JSON.stringify(value, null, 2) });
  }

  function readField(control, original) {
    if (control.type === "checkbox") return control.checked;
    if (control.type === "number") {
      const n = Number(control.value);
      if (control.value.trim() === "" || !Number.isFinite(n)) throw new Error(control.name + " must be a number");
      return n;
    }
    if (control.tagName === "TEXTAREA") return JSON.parse(control.value);
    return control.value;
  }

  function card(ev, live) {
    const id = "card-" + ev.attempt_id;
    const old = document.getElementById(id);
    if (old) old.remove();
    const title = ev.client_executed ? "Carry out " + ev.name + " in this browser?" : "Approve " + ev.name + "?";
    const node = el("section", { className: "card", id: id, role: "group", "aria-labelledby": id + "-title", "data-attempt": ev.attempt_id, "data-tool": ev.name });
    node.append(el("h2", { id: id + "-title", text: title }));
    if (ev.description) node.append(el("p", { className: "muted", text: ev.description }));
    if (ev.reason) node.append(el("p", { className: "reason" }, [el("strong", { text: "Why: " }), ev.reason]));
    if (ev.amount_usd !== null && ev.amount_usd !== undefined) node.append(el("p", { text: "Amount: $" + Number(ev.amount_usd).toFixed(2) }));
    if (ev.findings && ev.findings.length) {
      node.append(el("ul", { className: "findings", "aria-label": "Guard findings" }, ev.findings.map((f) =>
        el("li", { className: "finding-" + f.action }, [el("strong", { text: f.tier + " · " + f.action + ": " }), f.message, el("span", { className: "muted", text: " (" + f.source + ")" })]))));
    }
    // A client result carries no edits: the page carries out exactly what was asked.
    const editable = new Set(ev.client_executed ? [] : ev.modifiable_fields || []);
    const fields = el("dl", { className: "fields" });
    const controls = {};
    for (const [name, value] of Object.entries(ev.input || {})) {
      const fid = id + "-f-" + name;
      if (editable.has(name) && live) {
        fields.append(el("dt", {}, [el("label", { for: fid, text: name })]));
        const control = fieldInput(name, value, fid);
        controls[name] = control;
        fields.append(el("dd", {}, [control]));
      } else {
        fields.append(el("dt", { text: name }));
        fields.append(el("dd", { className: "mono", "data-field": name, text: typeof value === "string" ? value : JSON.stringify(value) }));
      }
    }
    node.append(fields);
    if (!live) {
      node.classList.add("decided");
      return node;
    }
    const actions = el("div", { className: "actions" });
    const note = el("p", { className: "card-status", role: "status", "aria-live": "polite" });
    if (ev.client_executed) {
      const known = clientTools[ev.name];
      const runIt = el("button", { type: "button", className: "primary", text: known ? "Run " + ev.name + " here" : "Send result" });
      let manual = null;
      if (!known) {
        const rid = id + "-result";
        manual = el("textarea", { id: rid, rows: 2 });
        actions.append(el("label", { for: rid, text: "Result" }), manual);
      }
      runIt.addEventListener("click", async () => {
        let content;
        let isError = false;
        try {
          content = known ? await known(ev.input) : manual.value;
        } catch (err) {
          content = String(err && err.message ? err.message : err);
          isError = true;
        }
        decide(ev, { decision: "client_result", content: content, is_error: isError }, node, note);
      });
      actions.append(runIt);
    } else {
      const approve = el("button", { type: "button", className: "primary", text: "Approve" });
      approve.addEventListener("click", () => {
        let edits;
        try {
          edits = collectEdits(controls, ev.input);
        } catch (err) {
          note.textContent = err.message;
          return;
        }
        decide(ev, { decision: "approve", edits: edits }, node, note);
      });
      actions.append(approve);
    }
    const rid = id + "-reason";
    const reason = el("input", { id: rid, type: "text", placeholder: "optional" });
    const reject = el("button", { type: "button", className: "danger", text: "Reject" });
    reject.addEventListener("click", () => {
      const body = { decision: "reject" };
      if (reason.value.trim()) body.reason = reason.value.trim();
      decide(ev, body, node, note);
    });
    actions.append(el("label", { for: rid, text: "Reason" }), reason, reject);
    node.append(actions, note);
    return node;
  }

  function collectEdits(controls, original) {
    const edits = {};
    for (const [name, control] of Object.entries(controls)) {
      const value = readField(control, original[name]);
      if (JSON.stringify(value) !== JSON.stringify(original[name])) edits[name] = value;
    }
    return edits;
  }

  async function decide(ev, body, node, note) {
    if (busy) return;
    for (const b of node.querySelectorAll("button, input, textarea")) b.disabled = true;
    note.textContent = "Sending…";
    try {
      const path = "/v1/sessions/" + encodeURIComponent(state.session) + "/decisions/" + encodeURIComponent(ev.approval_id);
      await run(() => window.MS.api(path, { method: "POST", json: body }));
      node.classList.add("decided");
      note.textContent = body.decision === "reject" ? "Rejected." : body.decision === "approve" ? "Approved." : "Result sent.";
    } catch (err) {
      note.textContent = err.message;
      for (const b of node.querySelectorAll("button, input, textarea")) b.disabled = false;
      return;
    }
    tell("");
    drain();
  }

  // ------------------------------------------------------------ streams

  function position(id) {
    const i = id ? id.lastIndexOf(":") : -1;
    if (i < 0) return null;
    return { stream: id.slice(0, i), pos: Number(id.slice(i + 1)) };
  }

  function receive(frame) {
    if (!frame.data) return false;
    const at = position(frame.id);
    const ev = JSON.parse(frame.data);
    if (at) {
      const last = state.last;
      if (last && last.stream === at.stream && at.pos <= last.pos) return false; // seen already
      state.last = { stream: at.stream, pos: at.pos, done: false };
    }
    const terminal = ev.type === "turn_complete" || ev.type === "error";
    if (state.last && terminal) state.last.done = true;
    state.log.push({ id: frame.id, ev: ev });
    save();
    draw(ev, true);
    if (ev.type !== "text_delta") grew(); // text grows on its frame
    return terminal;
  }

  // Read a stream to its terminal event; follow it again from the last position when cut.
  async function run(open) {
    setBusy(true);
    let attempts = 0;
    try {
      let response = await open();
      for (;;) {
        let ended = false;
        await window.MS.readSse(response, (frame) => {
          if (receive(frame)) ended = true;
        });
        if (ended) {
          status("");
          return;
        }
        attempts += 1;
        if (attempts > 5) throw new Error("the stream keeps breaking off; reload to try again");
        status("Reconnecting…");
        await new Promise((r) => setTimeout(r, 500 * attempts));
        response = await follow();
      }
    } finally {
      setBusy(false);
    }
  }

  function follow() {
    const last = state.last;
    const path = "/v1/sessions/" + encodeURIComponent(state.session) + "/stream?stream_id=" + encodeURIComponent(last.stream) + "&after=" + last.pos;
    return window.MS.api(path, { headers: { "Last-Event-ID": last.stream + ":" + last.pos } });
  }

  async function ensureSession() {
    if (state.session) return state.session;
    const info = await window.MS.apiJson("/v1/sessions", { method: "POST" });
    state = Object.assign(fresh(), { session: info.session_id, queue: state.queue });
    save();
    return state.session;
  }

  const WAITING = "An action above is waiting for your decision. Approve or reject it first, then send your message.";

  // The engine's refusal of a message while a decision is awaited.
  function waiting(message) {
    return /waiting for a decision/.test(message || "");
  }

  function waitingCard() {
    return document.querySelector("section.card:not(.decided)");
  }

  async function send(text) {
    if (busy) return;
    setBusy(true);
    let response;
    let bubble = null;
    const entry = { id: null, user: text };
    try {
      const session = await ensureSession();
      userMessage(text);
      bubble = transcript.lastElementChild;
      state.log.push(entry);
      save();
      view = null;
      scrollDown();
      response = await window.MS.api("/v1/sessions/" + encodeURIComponent(session) + "/messages", { method: "POST", json: { message: text } });
    } catch (err) {
      // Refused: the message was not sent. Take its bubble back, return the
      // text to the box, and say why in plain words next to it.
      if (bubble) bubble.remove();
      const at = state.log.indexOf(entry);
      if (at >= 0) state.log.splice(at, 1);
      save();
      if (!input.value.trim()) input.value = text;
      setBusy(false);
      if (waiting(err.message)) tell(WAITING);
      else status(err.message, true);
      return;
    }
    try {
      await run(() => response);
    } catch (err) {
      status(err.message, true);
    }
    drain();
  }

  // ------------------------------------------------------------ the queue

  function drawQueue() {
    queueList.replaceChildren(...state.queue.map((text) => el("li", { className: "msg user queued" }, [el("span", { className: "badge", text: "Queued" }), " ", text])));
    queueList.hidden = state.queue.length === 0;
  }

  function enqueue(text) {
    state.queue.push(text);
    save();
    drawQueue();
    tell(state.queue.length === 1 ? "Queued: it is sent when this turn ends." : state.queue.length + " messages queued: sent one by one when this turn ends.");
    grew();
  }

  // Send the next queued message, if the page is free to.
  function drain() {
    if (busy || !state.queue.length) return;
    if (waitingCard()) {
      tell("Your queued message is sent once you approve or reject the action above.");
      return;
    }
    const text = state.queue.shift();
    save();
    drawQueue();
    tell("");
    send(text);
  }

  async function stop() {
    if (!busy || !state.session) return;
    stopButton.disabled = true;
    tell("Stopping…");
    try {
      await window.MS.apiJson("/v1/sessions/" + encodeURIComponent(state.session) + "/cancel", { method: "POST" });
      // the stream ends with turn_complete(cancelled)
    } catch (err) {
      stopButton.disabled = false;
      tell("Could not stop the turn: " + err.message);
    }
  }

  // ------------------------------------------------------------ start-up

  function redraw() {
    transcript.replaceChildren();
    view = null;
    for (const item of state.log) {
      if (item.user !== undefined) {
        userMessage(item.user);
        view = null;
      } else {
        draw(item.ev, false);
      }
    }
    renderNow();
    drawQueue();
  }

  async function resume() {
    if (!state.session || !window.MS.key()) return;
    try {
      // A stream this tab has not seen yet (a reload before its first event came):
      // follow it from its start.
      const info = await window.MS.apiJson("/v1/sessions/" + encodeURIComponent(state.session));
      const current = info.active_stream || info.last_stream;
      if (current && (!state.last || state.last.stream !== current)) {
        state.last = { stream: current, pos: -1, done: false };
        view = null;
      }
      if (state.last && !state.last.done) {
        status("Resuming the stream…");
        await run(follow);
      }
      const body = await window.MS.apiJson("/v1/sessions/" + encodeURIComponent(state.session) + "/pending");
      if (body.pending && !document.querySelector("#card-" + CSS.escape(body.pending.attempt_id) + ":not(.decided)")) {
        view = null;
        const box = block();
        box.node.append(card(body.pending, true));
        view = null;
      }
      drain();
    } catch (err) {
      if (err.status === 404) {
        state = fresh();
        save();
        redraw();
        status("That conversation is gone; start a new one.");
      } else {
        status(err.message, true);
      }
    }
  }

  composer.addEventListener("submit", (e) => {
    e.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    if (busy || state.queue.length) {
      input.value = "";
      enqueue(text);
      return;
    }
    if (waitingCard()) {
      tell(WAITING); // the text stays in the box
      return;
    }
    input.value = "";
    tell("");
    send(text);
  });
  stopButton.addEventListener("click", stop);
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      composer.requestSubmit();
    }
  });
  document.getElementById("new-chat").addEventListener("click", () => {
    if (busy) return;
    state = fresh();
    save();
    redraw();
    status("");
    input.focus();
  });

  redraw();
  save();
  window.MS.setupKeyForm(resume);
  resume();
})();
