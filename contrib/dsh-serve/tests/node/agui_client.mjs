// Runs AG-UI's own client (HttpAgent from @ag-ui/client) against dsh-serve's POST /ag-ui.
// argv[2] is a JSON plan: {url, token, threadId, runs: [{message?, forwardedProps?, resumeWith?}]}.
// Each run adds `message` as a user message (the agent re-sends the whole conversation, as it
// does in an app), or answers every interrupt of the previous run with `resumeWith` as payload.
// Prints one JSON line per run: the events the client saw (after its own verification) and what
// the run returned, or the error the client raised.
import { HttpAgent } from "@ag-ui/client";
import { randomUUID } from "node:crypto";

const plan = JSON.parse(process.argv[2]);
const agent = new HttpAgent({
  url: `${plan.url}/ag-ui`,
  headers: { Authorization: `Bearer ${plan.token}` },
  threadId: plan.threadId,
});
let interrupts = [];
for (const [index, run] of plan.runs.entries()) {
  const events = [];
  const parameters = { runId: randomUUID(), forwardedProps: run.forwardedProps };
  if (run.message !== undefined) {
    agent.addMessage({ id: run.messageId ?? randomUUID(), role: "user", content: run.message });
  }
  if (run.resumeWith !== undefined) {
    parameters.resume = interrupts.map((interrupt) => ({
      interruptId: interrupt.id,
      status: run.resumeStatus ?? "resolved",
      payload: run.resumeWith,
    }));
  }
  try {
    const result = await agent.runAgent(parameters, {
      onEvent({ event }) {
        events.push(event);
      },
    });
    const finished = events.find((event) => event.type === "RUN_FINISHED");
    interrupts = finished?.outcome?.type === "interrupt" ? finished.outcome.interrupts : [];
    console.log(JSON.stringify({ run: index, events, newMessages: result.newMessages, messages: agent.messages }));
  } catch (error) {
    console.log(JSON.stringify({ run: index, events, error: String(error?.message ?? error) }));
  }
}
