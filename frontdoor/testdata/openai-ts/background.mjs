// Background responses with the official OpenAI JavaScript client against
// the front door: create and poll with responses.retrieve until done;
// cancel a slow one with responses.cancel; a streamed one left after a
// few deltas and resumed with retrieve(id, { stream: true, starting_after }).
// Prints one JSON object with what the client saw; the Go test
// (../../background_test.go) checks it.
//
//   node background.mjs BASE_URL TOKEN USER
import OpenAI from "openai";

const [baseURL, apiKey, user] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const params = (input) => ({ model: "auto", background: true, instructions: "You are a support agent.", input, user });

async function poll(id, until) {
  for (let i = 0; i < 600; i++) {
    const r = await client.responses.retrieve(id);
    if (until(r)) return r;
    await sleep(100);
  }
  throw new Error(`response ${id} never reached the status wanted`);
}
const running = (r) => r.status === "queued" || r.status === "in_progress";

const out = {};

// Create, then poll until completed.
let r = await client.responses.create(params("[[sim tokens=60]] Where is my order? (ts)"));
out.polled = { id: r.id, created_status: r.status, background: r.background };
r = await poll(r.id, (r) => !running(r));
Object.assign(out.polled, { status: r.status, text: r.output_text });

// Cancel a slow one.
r = await client.responses.create(params("[[sim tokens=2000]] A long answer nobody will wait for. (ts)"));
await poll(r.id, (r) => r.status === "in_progress");
const cancelled = await client.responses.cancel(r.id);
const after = await poll(r.id, (r) => !running(r));
out.cancelled = { id: r.id, cancel_status: cancelled.status, status: after.status };

// Stream, leave after three deltas, resume from the last event.
const seqs = [];
let text = "", id = "", deltas = 0;
const first = await client.responses.create({ ...params("[[sim tokens=200]] Tell me a long story. (ts)"), stream: true });
for await (const ev of first) {
  seqs.push(ev.sequence_number);
  if (ev.type === "response.created") id = ev.response.id;
  if (ev.type === "response.output_text.delta") {
    text += ev.delta;
    if (++deltas === 3) break; // leaves the connection
  }
}
let final = null;
const rest = await client.responses.retrieve(id, { stream: true, starting_after: seqs[seqs.length - 1] });
for await (const ev of rest) {
  seqs.push(ev.sequence_number);
  if (ev.type === "response.output_text.delta") text += ev.delta;
  if (ev.type === "response.completed") final = ev.response;
}
out.resumed = { id, seqs, text, final_text: final?.output?.[0]?.content?.[0]?.text ?? null, status: final?.status ?? null };
console.log(JSON.stringify(out));
