// Runs the AI SDK's own chat (AbstractChat, what useChat wraps, with its DefaultChatTransport)
// against dsh-serve's POST /api/chat and GET /api/chat/{id}/stream.
// argv[2] is a JSON plan: {url, token, chatId, steps: [{send: text} | {approve: {approved, reason?}}
// | {resume: true}]}. Prints one JSON line per step: the chat's status, error and messages.
import { AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from "ai";

class MemoryState {
  constructor() {
    this.status = "ready";
    this.error = undefined;
    this.messages = [];
  }
  pushMessage(message) {
    this.messages = this.messages.concat(message);
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  }
  snapshot(thing) {
    return structuredClone(thing);
  }
}

class TestChat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new MemoryState() });
  }
}

const plan = JSON.parse(process.argv[2]);
let finished = null;
const chat = new TestChat({
  id: plan.chatId,
  transport: new DefaultChatTransport({
    api: `${plan.url}/api/chat`,
    headers: { Authorization: `Bearer ${plan.token}` },
    prepareReconnectToStreamRequest: ({ id }) => ({
      api: `${plan.url}/api/chat/${id}/stream?token=${plan.token}`,
    }),
    // says when a response's headers arrived (a test waits for the reconnect to be streaming)
    fetch: async (url, init) => {
      const response = await fetch(url, init);
      console.log(JSON.stringify({ connected: String(url).replace(/\?.*/, ""), status: response.status }));
      return response;
    },
  }),
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  onFinish: () => finished?.(),
  onError: () => finished?.(),
});
const nextFinish = () => new Promise((resolve) => (finished = resolve));

for (const [index, step] of plan.steps.entries()) {
  if (step.send !== undefined) {
    await chat.sendMessage({ text: step.send });
  } else if (step.approve !== undefined) {
    const part = chat.messages.at(-1).parts.find((p) => p.state === "approval-requested");
    const done = nextFinish();
    await chat.addToolApprovalResponse({ id: part.approval.id, ...step.approve });
    await done;
  } else if (step.resume) {
    await chat.resumeStream();
  }
  console.log(JSON.stringify({ step: index, status: chat.status, error: chat.error?.message ?? null, messages: chat.messages }));
}
await chat.dispose?.();
