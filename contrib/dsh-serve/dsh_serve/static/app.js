// The built-in page: sessions, and one session's live log rendered as a chat. It uses only the
// native API (/api/...) of the server that served it, with the token from the URL fragment.

import { fileDiff } from "./diff.js";
import { renderMarkdown } from "./markdown.js";

const $ = (id) => document.getElementById(id);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// ------------------------------------------------------------------ token and API

function fragment() {
  return new URLSearchParams(location.hash.slice(1));
}

function setFragment(params) {
  history.replaceState(null, "", `${location.pathname}#${params.toString()}`);
}

let token = fragment().get("token") || sessionStorage.getItem("dsh.token") || "";

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${token}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
  });
  if (response.status === 401) {
    $("token-form").hidden = false;
  }
  if (!response.ok) {
    let message = `${response.status}`;
    try {
      message = (await response.json()).error.message;
    } catch {}
    throw new Error(message);
  }
  return response.status === 204 ? null : response.json();
}

// ------------------------------------------------------------------ the sessions list

let current = null; // the session shown
let follower = null; // its EventSource

async function refreshSessions() {
  let listing;
  try {
    listing = await api("GET", "/api/sessions");
  } catch (error) {
    showError(`cannot list the sessions: ${error.message}`);
    return;
  }
  const list = $("sessions");
  list.replaceChildren();
  for (const session of listing.sessions) {
    const li = el("li");
    li.dataset.sessionId = session.id;
    if (session.id === current) li.classList.add("selected");
    li.append(el("span", "title", session.title || session.id));
    li.append(el("span", "meta", `${session.status} · ${session.id}`));
    li.addEventListener("click", () => openSession(session.id));
    list.append(li);
  }
}

async function createSession(event) {
  event.preventDefault();
  const model = $("new-model").value.trim();
  try {
    const created = await api("POST", "/api/sessions", model ? { model } : {});
    await openSession(created.id);
    await refreshSessions();
  } catch (error) {
    showError(`cannot create a session: ${error.message}`);
  }
}

// ------------------------------------------------------------------ one session's log

class Transcript {
  constructor(root) {
    this.root = root;
    this.lastSeq = -1;
    this.running = false;
    this.steps = new Map(); // "turn/step" -> {element, parts: Map(index -> part)}
    this.tools = new Map(); // call id -> card
    this.pending = new Map(); // queued id -> element
    this.approvals = new Map(); // call id -> approval card
    this.questions = new Map(); // call id -> question card
    this.frame = null;
    this.dirty = new Set();
  }

  apply(event) {
    if (event.seq <= this.lastSeq) return; // a replay after a reconnect: already shown
    this.lastSeq = event.seq;
    const data = event.data;
    switch (event.type) {
      case "turn/start":
        this.setRunning(true);
        break;
      case "turn/end":
        this.setRunning(false);
        if (data.reason.kind !== "completed") {
          const failure = data.reason.failure ? `: ${data.reason.failure.message}` : data.reason.reason ? `: ${data.reason.reason}` : "";
          this.root.append(el("div", "turn-end", `turn ${data.turn} ended ${data.reason.kind}${failure}`));
        }
        refreshSessions();
        break;
      case "inbox/queued":
        if (data.kind !== "inject") this.addPending(data);
        break;
      case "inbox/cleared":
        for (const id of data.ids) this.pending.get(id)?.classList.replace("pending", "cleared");
        break;
      case "user/message":
        this.addUser(data.message, data.queued_id, "user");
        break;
      case "steering/message":
        this.addUser(data.message, data.queued_id, "steering");
        break;
      case "context/message":
        this.root.append(el("div", "msg context", `context: ${textOf(data.message)}`));
        break;
      case "assistant/chunk":
        this.chunk(data);
        break;
      case "assistant/message":
        this.message(data);
        break;
      case "tool/call":
        this.toolCard(data.call_id, data.name, data.arguments).dataset.state = "running";
        break;
      case "tool/result":
        this.toolResult(data);
        break;
      case "approval/requested":
        this.approvalCard(data);
        break;
      case "approval/resolved":
        this.approvalResolved(data);
        break;
      case "todo/updated":
        showTodos(data.todos);
        break;
      case "question/asked":
        this.questionCard(data);
        break;
      case "question/answered":
        this.questionAnswered(data);
        break;
      default:
        break;
    }
    this.scroll();
  }

  setRunning(running) {
    this.running = running;
    $("status").dataset.status = running ? "running" : "idle";
    updateComposer();
  }

  addPending(data) {
    if (this.pending.has(data.id)) return;
    const kind = data.kind === "steer" ? "steering" : "user";
    const bubble = el("div", `msg ${kind} pending`, textOf(data.message));
    bubble.dataset.queuedId = data.id;
    this.pending.set(data.id, bubble);
    this.root.append(bubble);
  }

  addUser(message, queuedId, kind) {
    const waiting = queuedId && this.pending.get(queuedId);
    if (waiting) {
      waiting.remove();
      this.pending.delete(queuedId);
    }
    if (message.source?.kind === "continuation") {
      this.root.append(el("div", "note", textOf(message)));
      return;
    }
    const bubble = el("div", `msg ${kind}`, textOf(message));
    if (queuedId) bubble.dataset.queuedId = queuedId;
    this.root.append(bubble);
  }

  step(data) {
    const key = `${data.turn}/${data.step}`;
    let step = this.steps.get(key);
    if (!step) {
      const element = el("div", "msg assistant");
      element.dataset.step = key;
      step = { element, parts: new Map() };
      this.steps.set(key, step);
      this.root.append(element);
    }
    return step;
  }

  chunk(data) {
    const chunk = data.chunk;
    if (!["text-delta", "reasoning-delta", "tool-call-delta"].includes(chunk.type)) return;
    const step = this.step(data);
    let part = step.parts.get(chunk.index);
    if (!part) {
      part = { kind: chunk.type, text: "", name: "", id: null, node: null };
      if (chunk.type === "text-delta") part.node = el("div", "text");
      else if (chunk.type === "reasoning-delta") part.node = reasoningNode("");
      step.parts.set(chunk.index, part);
      if (part.node) step.element.append(part.node);
    }
    if (chunk.type === "tool-call-delta") {
      part.id = chunk.id || part.id;
      part.name = chunk.name || part.name;
      part.text += chunk.arguments || "";
      if (part.id) {
        const card = this.toolCard(part.id, part.name, part.text, step.element);
        card.dataset.state = "streaming";
      }
      return;
    }
    part.text += chunk.text;
    this.dirty.add(part);
    if (this.frame === null) this.frame = requestAnimationFrame(() => this.paint());
  }

  paint() {
    this.frame = null;
    for (const part of this.dirty) {
      if (part.kind === "text-delta") part.node.replaceChildren(renderMarkdown(part.text));
      else part.node.querySelector(".body").textContent = part.text;
    }
    this.dirty.clear();
  }

  message(data) {
    // The message as logged replaces what streamed (it is what the model said, whole).
    const step = this.step(data);
    const element = step.element;
    const cards = [...element.querySelectorAll(".tool")];
    element.replaceChildren();
    for (const part of step.parts.values()) this.dirty.delete(part);
    for (const block of data.message.content) {
      if (block.type === "text") {
        const text = el("div", "text");
        text.append(renderMarkdown(block.text));
        element.append(text);
      } else if (block.type === "reasoning") {
        element.append(reasoningNode(block.text));
      } else if (block.type === "tool-call") {
        const card = cards.find((c) => c.dataset.callId === block.id);
        if (card) element.append(card);
        this.toolCard(block.id, block.name, block.arguments, element);
      }
    }
    if (data.interrupted) element.append(el("div", "note", "(interrupted)"));
    if (!element.childNodes.length) element.remove();
  }

  toolCard(callId, name, args, parent) {
    let card = this.tools.get(callId);
    if (!card) {
      card = el("details", "tool");
      card.dataset.callId = callId;
      card.append(el("summary"), el("pre", "arguments"), el("pre", "result"));
      this.tools.set(callId, card);
      (parent || this.root).append(card);
    }
    card.dataset.tool = name;
    card.querySelector("summary").textContent = `${name}(${summarize(args)})`;
    card.querySelector(".arguments").textContent = pretty(args);
    card.querySelector(".diff")?.remove();
    const diff = fileDiff(name, parsed(args));
    if (diff) {
      card.querySelector(".arguments").before(diff);
      card.open = true;
    }
    return card;
  }

  toolResult(data) {
    const message = data.message;
    const card = this.tools.get(message.call_id) || this.toolCard(message.call_id, "tool", "");
    card.dataset.state = message.is_error || data.error_code ? "error" : "done";
    if (data.error_code) card.dataset.errorCode = data.error_code;
    card.querySelector(".result").textContent = textOf(message);
    if (card.dataset.state === "error") card.querySelector(".diff")?.remove(); // a failed edit changed nothing
  }

  approvalCard(data) {
    const card = el("div", "approval");
    card.dataset.callId = data.call_id;
    card.dataset.state = "pending";
    card.append(el("div", "approval-title", `${data.tool} asks for approval: ${data.reason}`));
    const diff = fileDiff(data.tool, data.arguments);
    if (diff) card.append(diff);
    const original = JSON.stringify(data.arguments, null, 2);
    const args = el("textarea", "approval-arguments");
    args.value = original;
    args.rows = Math.min(12, original.split("\n").length + 1);
    args.setAttribute("aria-label", "arguments (edit to change them)");
    const reason = el("input", "approval-reason");
    reason.placeholder = "reason (told to the model when you deny)";
    const problem = el("div", "approval-error");
    const buttons = el("div", "approval-buttons");
    const answer = async (decision) => {
      const body = { decision };
      if (decision === "deny" && reason.value.trim()) body.reason = reason.value.trim();
      if (decision !== "deny" && args.value.trim() !== original.trim()) {
        try {
          body.arguments = JSON.parse(args.value);
        } catch (error) {
          problem.textContent = `the arguments are not JSON: ${error.message}`;
          return;
        }
      }
      try {
        await api("POST", `/api/sessions/${encodeURIComponent(current)}/approvals/${encodeURIComponent(data.call_id)}`, body);
        problem.textContent = "";
      } catch (error) {
        problem.textContent = error.message;
      }
    };
    for (const [decision, label] of [["once", "Allow once"], ["always", "Always allow"], ["deny", "Deny"]]) {
      const button = el("button", `approve-${decision}`, label);
      button.type = "button";
      button.addEventListener("click", () => answer(decision));
      buttons.append(button);
    }
    card.append(args, reason, buttons, problem);
    this.approvals.set(data.call_id, card);
    const tool = this.tools.get(data.call_id);
    if (tool) tool.after(card);
    else this.root.append(card);
  }

  approvalResolved(data) {
    const card = this.approvals.get(data.call_id);
    if (!card) return;
    card.dataset.state = data.decision;
    const words = { once: "allowed once", always: "always allowed", deny: "denied", cancelled: "cancelled" };
    let text = `${words[data.decision] || data.decision} by ${data.by}`;
    if (data.reason) text += `: ${data.reason}`;
    if (data.arguments) text += ` (arguments edited)`;
    card.replaceChildren(el("div", "approval-title", card.querySelector(".approval-title").textContent), el("div", "approval-outcome", text));
  }

  questionCard(data) {
    // ask_user's questions: options to pick (one, or several for multi_select) or an answer typed
    const card = el("div", "question");
    card.dataset.callId = data.call_id;
    card.dataset.state = "pending";
    card.append(el("div", "question-title", "The agent asks"));
    const fields = [];
    for (const question of data.questions) {
      const field = el("fieldset", "question-item");
      field.dataset.questionId = question.id;
      field.append(el("legend", "", question.question));
      const kind = question.multi_select ? "checkbox" : "radio";
      for (const option of question.options || []) {
        const label = el("label", "question-option");
        const input = el("input");
        input.type = kind;
        input.name = `${data.call_id}/${question.id}`;
        input.value = option;
        label.append(input, document.createTextNode(` ${option}`));
        field.append(label);
      }
      const other = el("input", "question-other");
      other.placeholder = question.options?.length ? "or type an answer" : "your answer";
      other.setAttribute("aria-label", `answer to: ${question.question}`);
      field.append(other);
      fields.push({ question, field, other });
      card.append(field);
    }
    const problem = el("div", "question-error");
    const submit = el("button", "question-submit", "Answer");
    submit.type = "button";
    submit.addEventListener("click", async () => {
      const answers = {};
      for (const { question, field, other } of fields) {
        const picked = [...field.querySelectorAll("input:checked")].map((input) => input.value);
        const typed = other.value.trim();
        if (question.multi_select) {
          if (typed) picked.push(typed);
          if (picked.length) answers[question.id] = picked;
        } else if (typed || picked.length) {
          answers[question.id] = typed || picked[0];
        }
        if (!(question.id in answers)) {
          problem.textContent = `answer every question ("${question.question}" has no answer)`;
          return;
        }
      }
      try {
        await api("POST", `/api/sessions/${encodeURIComponent(current)}/questions/${encodeURIComponent(data.call_id)}`, { answers });
        problem.textContent = "";
      } catch (error) {
        problem.textContent = error.message;
      }
    });
    card.append(submit, problem);
    this.questions.set(data.call_id, { card, questions: data.questions });
    const tool = this.tools.get(data.call_id);
    if (tool) tool.after(card);
    else this.root.append(card);
  }

  questionAnswered(data) {
    const asked = this.questions.get(data.call_id);
    if (!asked) return;
    const { card, questions } = asked;
    card.dataset.state = "answered";
    const outcome = el("ul", "question-answers");
    for (const question of questions) {
      const answer = data.answers[question.id];
      const shown = answer === undefined ? "(no answer)" : Array.isArray(answer) ? answer.join(", ") : answer;
      const item = el("li");
      item.append(el("span", "question-text", question.question), el("span", "question-answer", shown));
      outcome.append(item);
    }
    const by = Object.keys(data.answers).length ? `answered by ${data.by}` : `closed by ${data.by}, unanswered`;
    card.replaceChildren(el("div", "question-title", "The agent asked"), outcome, el("div", "question-outcome", by));
  }

  scroll() {
    const root = this.root;
    if (root.scrollHeight - root.scrollTop - root.clientHeight < 200) root.scrollTop = root.scrollHeight;
  }
}

const TODO_MARKS = { pending: "☐", in_progress: "◐", completed: "☑" };

function showTodos(todos) {
  // the latest todo/updated is the whole list; an empty one hides the panel
  const panel = $("todos");
  const list = el("ol");
  for (const todo of todos) {
    const item = el("li", "todo");
    item.dataset.status = todo.status;
    item.dataset.todoId = todo.id;
    item.append(el("span", "todo-mark", TODO_MARKS[todo.status] || "?"), el("span", "todo-text", todo.content));
    list.append(item);
  }
  const open = todos.filter((todo) => todo.status !== "completed").length;
  panel.replaceChildren(el("div", "todos-title", `Plan · ${open} open of ${todos.length}`), list);
  panel.hidden = todos.length === 0;
}

function reasoningNode(text) {
  const node = el("details", "reasoning");
  node.append(el("summary", "", "reasoning"), el("div", "body", text));
  return node;
}

function textOf(message) {
  return (message.content || [])
    .map((block) => (block.type === "text" ? block.text : block.type === "image" ? "[image]" : ""))
    .join("");
}

function parsed(args) {
  try {
    return JSON.parse(args);
  } catch {
    return null;
  }
}

function pretty(args) {
  try {
    return JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    return args;
  }
}

function summarize(args) {
  const flat = pretty(args).replace(/\s+/g, " ");
  return flat.length > 80 ? `${flat.slice(0, 79)}…` : flat;
}

let transcript = null;

async function openSession(id) {
  if (follower) follower.close();
  current = id;
  const params = fragment();
  params.set("session", id);
  setFragment(params);
  $("session-title").textContent = id;
  $("status").dataset.status = "idle";
  transcript = new Transcript($("transcript"));
  $("transcript").replaceChildren();
  showTodos([]);
  for (const li of document.querySelectorAll("#sessions li")) li.classList.toggle("selected", li.dataset.sessionId === id);
  updateComposer();
  const source = new EventSource(`/api/sessions/${encodeURIComponent(id)}/events?token=${encodeURIComponent(token)}`);
  follower = source;
  const view = transcript;
  const handle = (event) => {
    if (follower !== source) return;
    view.apply(JSON.parse(event.data));
  };
  // each log event is an SSE event named by its type: the page listens to the types it shows
  for (const type of EVENT_TYPES) source.addEventListener(type, handle);
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED && follower === source) showError(`lost the live log of ${id}`);
  };
  source.onopen = () => showError("");
}

const EVENT_TYPES = [
  "turn/start", "turn/end", "inbox/queued", "inbox/cleared", "user/message", "steering/message",
  "context/message", "assistant/chunk", "assistant/message", "tool/call", "tool/result",
  "approval/requested", "approval/resolved", "todo/updated", "question/asked", "question/answered",
];

// ------------------------------------------------------------------ the composer

function updateComposer() {
  const running = Boolean(transcript?.running);
  $("prompt").disabled = !current;
  $("send").disabled = !current;
  $("send").textContent = running ? "Steer" : "Send";
  $("queue").hidden = !running;
  $("cancel").disabled = !running;
}

async function deliver(verb) {
  const prompt = $("prompt");
  const content = prompt.value;
  if (!current || !content.trim()) return;
  const id = crypto.randomUUID();
  try {
    await api("POST", `/api/sessions/${encodeURIComponent(current)}/${verb}`, { content, id });
    prompt.value = "";
  } catch (error) {
    showError(`cannot ${verb}: ${error.message}`);
  }
}

async function cancel() {
  if (!current) return;
  try {
    await api("POST", `/api/sessions/${encodeURIComponent(current)}/cancel`);
  } catch (error) {
    showError(`cannot cancel: ${error.message}`);
  }
}

// ------------------------------------------------------------------ start

function start() {
  if (token) sessionStorage.setItem("dsh.token", token);
  $("token-form").hidden = Boolean(token);
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    token = $("token-input").value.trim();
    sessionStorage.setItem("dsh.token", token);
    const params = fragment();
    params.set("token", token);
    setFragment(params);
    $("token-form").hidden = true;
    refreshSessions();
  });
  $("new-session-form").addEventListener("submit", createSession);
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    deliver(transcript?.running ? "steer" : "send");
  });
  $("prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      deliver(transcript?.running ? "steer" : "send");
    }
  });
  $("queue").addEventListener("click", () => deliver("send"));
  $("cancel").addEventListener("click", cancel);
  refreshSessions();
  setInterval(refreshSessions, 5000);
  const wanted = fragment().get("session");
  if (wanted && token) openSession(wanted);
}

start();
