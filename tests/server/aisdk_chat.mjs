// The `ai` package's own chat client (AbstractChat + DefaultChatTransport, what
// useChat runs) headless in node against a mainspring server.
//
// node aisdk_chat.mjs <ai package dir> <scenario> <base url> <api key> <chat id>
//   approve | reject: ask "Pay Alice $20", answer the approval, print the chat.
//   client-tool: "sign it"; onToolCall runs sign_transaction in "the browser",
//           addToolOutput + sendAutomaticallyWhen send its output back.
//   resume: resumeStream() on a running chat; print FOLLOWING once a chunk came,
//           then the chat when the stream ends.
//   while-pending: ask "Pay Alice $20", then ask something else while the approval
//           waits (the server shows it again), then approve the one shown again;
//           sendAutomaticallyWhen sends the answer.
//   restore: a new chat whose initial messages are GET …/messages (checked with
//           validateUIMessages), answering the approval they show.
//   edit: ask "Pay Alice $20", add a data-approval-edits part (amount_usd 15) to the
//           assistant message, approve.
//   stop: "go", then chat.stop() once the tool's progress arrived.
//   chunks: POST a question, check every chunk with uiMessageChunkSchema and fold
//           them with readUIMessageStream; print the chunks and the message.
// Output: one JSON line (and FOLLOWING before it for `resume`).
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [pkgDir, scenario, base, key, chatId] = process.argv.slice(2);
const ai = await import(pathToFileURL(join(pkgDir, "dist", "index.mjs")).href);
const { AbstractChat, DefaultChatTransport } = ai;

class State {
  constructor() {
    this.status = "ready";
    this.error = undefined;
    this.messages = [];
  }
  pushMessage(m) {
    this.messages = this.messages.concat(m);
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }
  replaceMessage(i, m) {
    this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)];
  }
  snapshot(thing) {
    return structuredClone(thing);
  }
}

class Chat extends AbstractChat {
  constructor(options) {
    const state = new State();
    state.messages = options.messages ?? [];
    super({ ...options, state });
  }
}

const api = `${base}/v1/aisdk/chat`;
const headers = { Authorization: `Bearer ${key}` };
const errors = [];
const data = [];
let following = false;

function chat() {
  return new Chat({
    id: chatId,
    transport: new DefaultChatTransport({ api, headers }),
    onError: (e) => errors.push(String(e && e.message ? e.message : e)),
    onData: (part) => {
      data.push(part);
      if (!following) {
        following = true;
        process.stdout.write("FOLLOWING\n");
      }
    },
  });
}

function waitingApproval(c) {
  return c.messages
    .at(-1)
    ?.parts.find((p) => p.type.startsWith("tool-") && p.state === "approval-requested");
}

function report(c, extra = {}) {
  process.stdout.write(
    JSON.stringify({ status: c.status, errors, messages: c.messages, data, ...extra }) + "\n",
  );
}

if (scenario === "approve" || scenario === "reject") {
  const c = chat();
  await c.sendMessage({ text: "Pay Alice $20" });
  const asked = structuredClone(c.messages);
  const part = c.messages
    .at(-1)
    .parts.find((p) => p.type.startsWith("tool-") && p.state === "approval-requested");
  if (!part) {
    report(c, { asked });
  } else {
    await c.addToolApprovalResponse({
      id: part.approval.id,
      approved: scenario === "approve",
      reason: scenario === "approve" ? undefined : "not today",
    });
    await c.sendMessage();
    report(c, { asked });
  }
} else if (scenario === "while-pending") {
  // the documented setup: the answer is sent on its own (sendAutomaticallyWhen)
  const c = new Chat({
    id: chatId,
    transport: new DefaultChatTransport({ api, headers }),
    onError: (e) => errors.push(String(e && e.message ? e.message : e)),
    sendAutomaticallyWhen: ai.lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  await c.sendMessage({ text: "Pay Alice $20" });
  await c.sendMessage({ text: "how much was it again?" });
  const asked = structuredClone(c.messages);
  const part = waitingApproval(c);
  if (part) {
    await c.addToolApprovalResponse({ id: part.approval.id, approved: true });
    const done = () => c.messages.at(-1)?.parts.at(-1)?.text?.includes("Done");
    for (let i = 0; i < 400 && !(done() && c.status === "ready") && errors.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  report(c, { asked });
} else if (scenario === "edit") {
  const c = chat();
  await c.sendMessage({ text: "Pay Alice $20" });
  const asked = structuredClone(c.messages);
  const part = waitingApproval(c);
  if (part) {
    const last = c.messages.at(-1);
    const edits = { approvalId: part.approval.id, edits: { amount_usd: 15 } };
    c.messages = [
      ...c.messages.slice(0, -1),
      { ...last, parts: [...last.parts, { type: "data-approval-edits", data: edits }] },
    ];
    await c.addToolApprovalResponse({ id: part.approval.id, approved: true });
    await c.sendMessage();
  }
  report(c, { asked });
} else if (scenario === "restore") {
  const response = await fetch(`${api}/${chatId}/messages`, { headers });
  const stored = await response.json();
  const messages = await ai.validateUIMessages({ messages: stored });
  const c = new Chat({
    id: chatId,
    messages,
    transport: new DefaultChatTransport({ api, headers }),
    onError: (e) => errors.push(String(e && e.message ? e.message : e)),
  });
  const part = waitingApproval(c);
  const restored = structuredClone(c.messages);
  if (part) {
    await c.addToolApprovalResponse({ id: part.approval.id, approved: true });
    await c.sendMessage();
  }
  report(c, { restored });
} else if (scenario === "stop") {
  let c;
  let progressed;
  const progress = new Promise((resolve) => (progressed = resolve));
  c = new Chat({
    id: chatId,
    transport: new DefaultChatTransport({ api, headers }),
    onError: (e) => errors.push(String(e && e.message ? e.message : e)),
    onData: () => progressed(),
  });
  const sending = c.sendMessage({ text: "go" });
  await progress;
  await c.stop();
  await sending;
  report(c);
} else if (scenario === "client-tool") {
  // the browser runs the tool (onToolCall), the chat sends its output on its own
  let c;
  c = new Chat({
    id: chatId,
    transport: new DefaultChatTransport({ api, headers }),
    onError: (e) => errors.push(String(e && e.message ? e.message : e)),
    onToolCall: async ({ toolCall }) => {
      if (toolCall.toolName === "sign_transaction") {
        void c.addToolOutput({  // not awaited: onToolCall runs inside the chat's job
          tool: "sign_transaction",
          toolCallId: toolCall.toolCallId,
          output: { tx: "0xdeadbeef", to: toolCall.input.to },
        });
      }
    },
    sendAutomaticallyWhen: ai.lastAssistantMessageIsCompleteWithToolCalls,
  });
  await c.sendMessage({ text: "sign it" });
  const said = () => {
    const last = c.messages.at(-1)?.parts.at(-1);
    return last && last.type === "text" && last.text.includes("client said");
  };
  for (let i = 0; i < 400 && !(said() && c.status === "ready") && errors.length === 0; i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
  report(c);
} else if (scenario === "resume") {
  const c = chat();
  await c.resumeStream();
  report(c);
} else if (scenario === "chunks") {
  const { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } = ai;
  const response = await fetch(api, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({
      id: chatId,
      trigger: "submit-message",
      messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "Pay Alice $20" }] }],
    }),
  });
  const header = response.headers.get("x-vercel-ai-ui-message-stream");
  const chunks = [];
  const invalid = [];
  const checked = parseJsonEventStream({ stream: response.body, schema: uiMessageChunkSchema })
    .pipeThrough(
      new TransformStream({
        transform(result, controller) {
          if (result.success) {
            chunks.push(result.value);
            controller.enqueue(result.value);
          } else {
            invalid.push(String(result.error));
          }
        },
      }),
    );
  let message;
  for await (const m of readUIMessageStream({ stream: checked })) message = m;
  process.stdout.write(JSON.stringify({ header, chunks, invalid, message }) + "\n");
} else {
  process.stderr.write(`unknown scenario ${scenario}\n`);
  process.exit(2);
}
