// Markdown to DOM nodes, safely: every piece of text becomes a text node (never HTML), links keep
// only http(s) and mailto targets and open nothing by themselves, and images are never loaded
// (they show as their alt text). Model or tool output can neither run a script nor fetch a
// resource through this renderer; the page's Content-Security-Policy forbids both besides.

const SAFE_LINK = /^(https?:|mailto:)/i;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// Inline spans: `code`, **bold**, *em* / _em_, [text](url), ![alt](src), and plain text.
const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|_([^_\s][^_]*)_|!\[([^\]]*)\]\(([^)\s]*)[^)]*\)|\[([^\]]+)\]\(([^)\s]*)[^)]*\)/g;

export function renderInline(text, parent) {
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) parent.append(document.createTextNode(text.slice(last, m.index)));
    if (m[1] !== undefined) parent.append(el("code", "", m[2]));
    else if (m[3] !== undefined || m[4] !== undefined) {
      const strong = el("strong");
      renderInline(m[3] ?? m[4], strong);
      parent.append(strong);
    } else if (m[5] !== undefined || m[6] !== undefined) {
      const em = el("em");
      renderInline(m[5] ?? m[6], em);
      parent.append(em);
    } else if (m[7] !== undefined) {
      parent.append(el("span", "md-image", `[image: ${m[7] || m[8]}]`));
    } else if (m[9] !== undefined) {
      const target = m[10];
      if (SAFE_LINK.test(target)) {
        const a = el("a");
        a.href = target;
        a.rel = "noopener noreferrer nofollow";
        a.target = "_blank";
        a.referrerPolicy = "no-referrer";
        renderInline(m[9], a);
        parent.append(a);
      } else {
        parent.append(document.createTextNode(m[0]));
      }
    }
    last = m.index + m[0].length;
  }
  if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
}

// Blocks: fenced code, headings, lists, quotes, rules and paragraphs.
export function renderMarkdown(source) {
  const root = document.createDocumentFragment();
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  let paragraph = [];
  const flush = () => {
    if (paragraph.length) {
      const p = el("p");
      paragraph.forEach((line, n) => {
        if (n) p.append(document.createElement("br"));
        renderInline(line, p);
      });
      root.append(p);
      paragraph = [];
    }
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(```+|~~~+)\s*([\w+-]*)/);
    if (fence) {
      flush();
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i += 1; // the closing fence (or the end: a fence still streaming)
      const pre = el("pre");
      const code = el("code", fence[2] ? `language-${fence[2]}` : "", body.join("\n"));
      pre.append(code);
      root.append(pre);
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    if (heading) {
      flush();
      const h = el(`h${Math.min(heading[1].length + 2, 6)}`);
      renderInline(heading[2], h);
      root.append(h);
      i += 1;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      flush();
      root.append(el("hr"));
      i += 1;
      continue;
    }
    const item = line.match(/^\s*([-*+]|\d+[.)])\s+(.*)$/);
    if (item) {
      flush();
      const ordered = /\d/.test(item[1]);
      const list = el(ordered ? "ol" : "ul");
      while (i < lines.length) {
        const next = lines[i].match(/^\s*([-*+]|\d+[.)])\s+(.*)$/);
        if (!next || /\d/.test(next[1]) !== ordered) break;
        const li = el("li");
        renderInline(next[2], li);
        list.append(li);
        i += 1;
      }
      root.append(list);
      continue;
    }
    if (/^\s*>/.test(line)) {
      flush();
      const quoted = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) quoted.push(lines[i++].replace(/^\s*>\s?/, ""));
      const q = el("blockquote");
      q.append(renderMarkdown(quoted.join("\n")));
      root.append(q);
      continue;
    }
    if (!line.trim()) flush();
    else paragraph.push(line);
    i += 1;
  }
  flush();
  return root;
}
