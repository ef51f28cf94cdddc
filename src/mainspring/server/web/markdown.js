// Markdown for the chat page: markdown-it renders it, DOMPurify cleans the result.
//
// Both are vendored at pinned versions (vendor/README.md). markdown-it runs
// with raw HTML off (a model's "<script>" shows as text); DOMPurify then keeps
// only harmless tags and http(s)/mailto links, and hands back DOM nodes, so
// no markup string is ever assigned to the page. Code blocks get a copy
// button; tables scroll sideways in their own region.
"use strict";

(function () {
  const md = window.markdownit({ html: false, linkify: true, typographer: false });
  // Column alignment as a class: the CSP refuses style attributes.
  function aligned(tokens, idx, options, env, self) {
    const token = tokens[idx];
    const style = token.attrGet("style");
    if (style) {
      token.attrs = token.attrs.filter((attr) => attr[0] !== "style");
      const align = /text-align:(left|right|center)/.exec(style);
      if (align) token.attrJoin("class", "align-" + align[1]);
    }
    return self.renderToken(tokens, idx, options);
  }
  md.renderer.rules.th_open = aligned;
  md.renderer.rules.td_open = aligned;
  const purify = window.DOMPurify;
  const OPTIONS = {
    RETURN_DOM_FRAGMENT: true,
    FORBID_ATTR: ["style"],
    FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed"],
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
  };
  purify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A" && node.hasAttribute("href")) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    }
  });

  function decorate(fragment) {
    for (const pre of fragment.querySelectorAll("pre")) {
      const copy = document.createElement("button");
      copy.type = "button";
      copy.className = "copy-code";
      copy.textContent = "Copy";
      copy.setAttribute("aria-label", "Copy code");
      const box = document.createElement("div");
      box.className = "codeblock";
      pre.replaceWith(box);
      box.append(copy, pre);
    }
    for (const table of fragment.querySelectorAll("table")) {
      const wrap = document.createElement("div");
      wrap.className = "table-wrap";
      wrap.tabIndex = 0; // a region that scrolls must be reachable by keyboard
      wrap.setAttribute("role", "region");
      wrap.setAttribute("aria-label", "Table");
      table.replaceWith(wrap);
      wrap.append(table);
    }
    return fragment;
  }

  // Replace node's children with source rendered as Markdown.
  function render(node, source) {
    node.replaceChildren(decorate(purify.sanitize(md.render(source), OPTIONS)));
  }

  document.addEventListener("click", async (ev) => {
    const button = ev.target instanceof Element ? ev.target.closest("button.copy-code") : null;
    if (!button) return;
    const code = button.parentElement.querySelector("pre");
    try {
      await navigator.clipboard.writeText(code ? code.textContent : "");
      button.textContent = "Copied";
    } catch (_) {
      button.textContent = "Copy failed";
    }
    setTimeout(() => {
      button.textContent = "Copy";
    }, 1500);
  });

  window.MS.markdown = { render: render };
})();
