// `@ag-ui/client`'s own HttpAgent (its event verifier and reducer, what a web
// app runs) headless in node against a mainspring server's AG-UI route.
//
// node agui_client.mjs <@ag-ui/client package dir> <base url> <other base url> <api key> <thread id>
//
// One thread, four runs, on two workers of one deployment: "Pay Alice $20"
// (ends in an interrupt), the resume that approves it (on the other worker),
// "What can you do?", then a reloaded page (a new agent holding the messages
// the last run left, as a page restores them) asks "And then?" on the other
// worker. For each run it records the messages as the stream left them (just
// before MESSAGES_SNAPSHOT is applied) and as the run left them (after it).
// Output: one JSON line {"runs": [{"streamed": [...], "final": [...]}], "errors": [...]}.
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [pkgDir, base, otherBase, key, threadId] = process.argv.slice(2);
const client = await import(pathToFileURL(join(pkgDir, "dist", "index.mjs")).href);
const { HttpAgent } = client;

const errors = [];
const runs = [];

function agentFor(url, initialMessages) {
  return new HttpAgent({
    url: `${url}/v1/agui`,
    headers: { Authorization: `Bearer ${key}` },
    threadId,
    initialMessages,
  });
}

async function run(agent, parameters) {
  let streamed = null;
  let interrupts = [];
  await agent.runAgent(parameters, {
    onMessagesSnapshotEvent: ({ messages }) => {
      streamed = structuredClone(messages);
    },
    onRunFinishedEvent: ({ event }) => {
      if (event.outcome && event.outcome.type === "interrupt") {
        interrupts = event.outcome.interrupts;
      }
    },
    onRunFailed: ({ error }) => {
      errors.push(String(error && error.message ? error.message : error));
    },
  });
  runs.push({ streamed, final: structuredClone(agent.messages) });
  return interrupts;
}

try {
  const agent = agentFor(base, []);
  agent.addMessage({ id: "client-question-1", role: "user", content: "Pay Alice $20" });
  const interrupts = await run(agent);
  if (interrupts.length !== 1) {
    throw new Error(`expected one interrupt, got ${JSON.stringify(interrupts)}`);
  }
  agent.url = `${otherBase}/v1/agui`; // the next request lands on the other worker
  await run(agent, {
    resume: [{ interruptId: interrupts[0].id, status: "resolved", payload: { approved: true } }],
  });
  agent.url = `${base}/v1/agui`;
  agent.addMessage({ id: "client-question-2", role: "user", content: "What can you do?" });
  await run(agent);
  const reloaded = agentFor(otherBase, JSON.parse(JSON.stringify(agent.messages)));
  reloaded.addMessage({ id: "client-question-3", role: "user", content: "And then?" });
  await run(reloaded);
} catch (e) {
  errors.push(String(e && e.stack ? e.stack : e));
}
console.log(JSON.stringify({ runs, errors }));
