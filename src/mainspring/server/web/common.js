// Shared by the mainspring pages: the credential, the theme, API calls and an SSE reader.
"use strict";

(function () {
  const KEY_STORE = "mainspring.key";
  const THEME_STORE = "mainspring.theme";

  // A ?key= on first load goes to this tab's storage and out of the address bar.
  (function takeKeyFromUrl() {
    const url = new URL(window.location.href);
    const key = url.searchParams.get("key");
    if (key) {
      sessionStorage.setItem(KEY_STORE, key);
      url.searchParams.delete("key");
      history.replaceState(null, "", url.pathname + url.search + url.hash);
    }
  })();

  function key() {
    return sessionStorage.getItem(KEY_STORE);
  }

  let onKey = null;

  function askForKey(message) {
    const form = document.getElementById("key-form");
    form.hidden = false;
    const input = document.getElementById("key-input");
    if (message) setStatus(message, true);
    input.focus();
  }

  function setupKeyForm(callback) {
    onKey = callback;
    const form = document.getElementById("key-form");
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const input = document.getElementById("key-input");
      const value = input.value.trim();
      if (!value) return;
      sessionStorage.setItem(KEY_STORE, value);
      input.value = "";
      form.hidden = true;
      setStatus("");
      if (onKey) onKey();
    });
    if (!key()) askForKey("This server is private: enter its API key.");
    return Boolean(key());
  }

  function setStatus(text, isError) {
    const el = document.getElementById("status") || document.getElementById("rail-status");
    if (!el) return;
    el.textContent = text;
    el.classList.toggle("error", Boolean(isError));
  }

  class ApiError extends Error {
    constructor(status, type, message) {
      super(message);
      this.status = status;
      this.type = type;
    }
  }

  async function api(path, options) {
    const opts = Object.assign({ method: "GET" }, options || {});
    const headers = new Headers(opts.headers || {});
    const k = key();
    if (k) headers.set("Authorization", "Bearer " + k);
    if (opts.json !== undefined) {
      headers.set("Content-Type", "application/json");
      opts.body = JSON.stringify(opts.json);
      delete opts.json;
    }
    // A POST must not look like a cross-site form post (the server refuses those).
    if (opts.method !== "GET") headers.set("X-Requested-With", "mainspring");
    opts.headers = headers;
    const response = await fetch(path, opts);
    if (!response.ok) {
      let type = "HTTPError";
      let message = response.status + " " + response.statusText;
      try {
        const body = await response.json();
        if (body && body.error) {
          type = body.error.type || type;
          message = body.error.message || message;
        }
      } catch (_) {
        /* not JSON */
      }
      if (response.status === 401) askForKey("The server refused the key: enter a valid one.");
      throw new ApiError(response.status, type, message);
    }
    return response;
  }

  async function apiJson(path, options) {
    const response = await api(path, options);
    return response.json();
  }

  // Server-sent events from a fetch response (a POST cannot use EventSource).
  async function readSse(response, onEvent, signal) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let id = null;
    let type = "message";
    let data = [];
    function dispatch() {
      if (data.length) onEvent({ id: id, event: type, data: data.join("\n") });
      type = "message";
      data = [];
    }
    for (;;) {
      if (signal && signal.aborted) {
        await reader.cancel();
        return;
      }
      const chunk = await reader.read();
      if (chunk.done) break;
      buffer += decoder.decode(chunk.value, { stream: true });
      let nl;
      while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + (buffer[nl] === "\r" && buffer[nl + 1] === "\n" ? 2 : 1));
        if (line === "") {
          dispatch();
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "id") id = value;
        else if (field === "event") type = value;
        else if (field === "data") data.push(value);
      }
    }
    dispatch();
  }

  // Theme: the system's by default; a choice (light, dark) is remembered, and
  // "system" forgets it. Each page has the same three-way select (#theme-select).
  function applyTheme(theme) {
    if (theme === "light" || theme === "dark") document.documentElement.dataset.theme = theme;
    else delete document.documentElement.dataset.theme;
    const select = document.getElementById("theme-select");
    if (select) select.value = theme === "light" || theme === "dark" ? theme : "system";
  }

  function chooseTheme(theme) {
    if (theme === "light" || theme === "dark") localStorage.setItem(THEME_STORE, theme);
    else localStorage.removeItem(THEME_STORE);
    applyTheme(theme);
  }

  function setupTheme() {
    applyTheme(localStorage.getItem(THEME_STORE));
    const select = document.getElementById("theme-select");
    if (select) select.addEventListener("change", () => chooseTheme(select.value));
  }

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "text") node.textContent = value;
      else if (name === "className") node.className = value;
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of [].concat(children || [])) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  window.MS = {
    api: api,
    apiJson: apiJson,
    ApiError: ApiError,
    askForKey: askForKey,
    el: el,
    key: key,
    readSse: readSse,
    setStatus: setStatus,
    setupKeyForm: setupKeyForm,
    setupTheme: setupTheme,
  };
  document.addEventListener("DOMContentLoaded", setupTheme);
})();
