// Markdown (sanitised) and JavaScript (highlighted, one entry per line).

import DOMPurify from "dompurify";
import { Marked } from "marked";
import hljs from "highlight.js/lib/core";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";

hljs.registerLanguage("javascript", javascript);
hljs.registerLanguage("json", json);

// Raw HTML in a model's answer is shown as the text it is, never parsed as markup: a model has
// no need to write HTML, and an `onerror` parsed even in DOMPurify's inert document makes
// Chromium report the handler the page's policy refuses.
const marked = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: { html: ({ text }) => escapeHtml(text) },
});

function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);
}

// Links a model writes open in a new tab and cannot reach back into the playground.
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

/// A model's markdown as HTML that is safe to insert: no scripts, handlers, or foreign forms,
/// and no image that would make the browser fetch something (only inline `data:` images show;
/// the others become their alt text). Files the prompt made appear as file outputs instead.
export function markdown(text) {
  const html = marked.parse(text || "");
  const fragment = DOMPurify.sanitize(html, {
    FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "video", "audio", "source", "picture"],
    FORBID_ATTR: ["style", "srcset"],
    RETURN_DOM_FRAGMENT: true,
  });
  for (const image of fragment.querySelectorAll("img")) {
    const source = image.getAttribute("src") || "";
    if (!/^data:image\/(png|jpeg|gif|webp);/i.test(source)) {
      const alt = image.getAttribute("alt");
      image.replaceWith(document.createTextNode(alt ? `[image: ${alt}]` : "[image]"));
    }
  }
  const holder = document.createElement("div");
  holder.appendChild(fragment);
  return holder.innerHTML;
}

/// Highlighted code split into lines, each a string of HTML with its spans closed, so lines
/// can be numbered and marked one by one.
export function highlightLines(code, language = "javascript") {
  const html = hljs.highlight(code || "", { language, ignoreIllegals: true }).value;
  const lines = [];
  const open = [];
  let line = "";
  const tag = /<span class="([^"]*)">|<\/span>|\n|[^<\n]+|</g;
  let match;
  while ((match = tag.exec(html)) !== null) {
    const piece = match[0];
    if (piece === "\n") {
      line += "</span>".repeat(open.length);
      lines.push(line);
      line = open.map((name) => `<span class="${name}">`).join("");
    } else if (match[1] !== undefined) {
      open.push(match[1]);
      line += piece;
    } else if (piece === "</span>") {
      open.pop();
      line += piece;
    } else {
      line += piece;
    }
  }
  line += "</span>".repeat(open.length);
  lines.push(line);
  return lines;
}

export function prettyJson(value) {
  if (value === undefined) return "";
  if (typeof value === "string") return value;
  return JSON.stringify(value, null, 2);
}
