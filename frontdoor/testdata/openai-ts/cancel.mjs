// Cancelling a background response with the official OpenAI JavaScript
// client against the front door: create a background response (plain, or
// with stream: true and left after its first delta) and responses.cancel
// it DELAY ms after it was created. Prints one JSON object with the
// response's id, what cancel answered and when it was sent (Date.now(),
// ms); the Go test (../../cancelcut_test.go) checks what the upstream saw
// of the request.
//
//   node cancel.mjs BASE_URL TOKEN USER QUESTION plain|stream DELAY
import OpenAI from "openai";

const [baseURL, apiKey, user, input, mode, delay] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const params = { model: "auto", background: true, instructions: "You are a support agent.", input, user };

const created = Date.now();
let id = "";
if (mode === "stream") {
  const s = await client.responses.create({ ...params, stream: true });
  for await (const ev of s) {
    if (ev.type === "response.created") id = ev.response.id;
    if (ev.type === "response.output_text.delta") break; // leaves the connection
  }
} else {
  id = (await client.responses.create(params)).id;
}
await sleep(Math.max(0, created + Number(delay) - Date.now()));
const cancelSentMS = Date.now();
const cancelled = await client.responses.cancel(id);
console.log(JSON.stringify({ id, cancel_status: cancelled.status, cancel_sent_ms: cancelSentMS }));
