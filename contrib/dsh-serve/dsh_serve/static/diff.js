// A line diff of a file edit's old and new text, for the tool cards and approval cards: removed
// lines, added lines and the unchanged lines between them, as DOM nodes (text only).

const LIMIT = 2000; // lines per side beyond which the edit shows as plain removed/added blocks

function lcsTable(a, b) {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const table = new Uint32Array(rows * cols);
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      table[i * cols + j] =
        a[i] === b[j] ? table[(i + 1) * cols + j + 1] + 1 : Math.max(table[(i + 1) * cols + j], table[i * cols + j + 1]);
    }
  }
  return { table, cols };
}

// [{kind: "same" | "del" | "add", text}], in order.
export function lineDiff(oldText, newText) {
  const a = oldText.split("\n");
  const b = newText.split("\n");
  if (a.length > LIMIT || b.length > LIMIT) {
    return [...a.map((text) => ({ kind: "del", text })), ...b.map((text) => ({ kind: "add", text }))];
  }
  const { table, cols } = lcsTable(a, b);
  const out = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push({ kind: "same", text: a[i] });
      i++;
      j++;
    } else if (table[(i + 1) * cols + j] >= table[i * cols + j + 1]) {
      out.push({ kind: "del", text: a[i++] });
    } else {
      out.push({ kind: "add", text: b[j++] });
    }
  }
  while (i < a.length) out.push({ kind: "del", text: a[i++] });
  while (j < b.length) out.push({ kind: "add", text: b[j++] });
  return out;
}

const SIGN = { same: " ", del: "-", add: "+" };

// The diff view of a file tool's arguments, or null when the call is not a file edit.
export function fileDiff(tool, args) {
  let oldText;
  let newText;
  if (tool === "edit_file" && typeof args?.old_text === "string" && typeof args?.new_text === "string") {
    [oldText, newText] = [args.old_text, args.new_text];
  } else if (tool === "write_file" && typeof args?.content === "string") {
    [oldText, newText] = ["", args.content];
  } else {
    return null;
  }
  const view = document.createElement("div");
  view.className = "diff";
  const header = document.createElement("div");
  header.className = "diff-path";
  header.textContent = `${tool === "write_file" ? "write" : "edit"} ${args.path ?? ""}`;
  view.append(header);
  const lines = oldText === "" ? newText.split("\n").map((text) => ({ kind: "add", text })) : lineDiff(oldText, newText);
  for (const line of lines) {
    const row = document.createElement("div");
    row.className = `diff-line ${line.kind}`;
    row.textContent = `${SIGN[line.kind]} ${line.text}`;
    view.append(row);
  }
  return view;
}
