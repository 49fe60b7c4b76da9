// A message streamed by Anthropic's official TypeScript client while the
// test kills the worker: after the third text delta it prints "deltas 3"
// (the test then SIGKILLs the worker and starts another) and reads on to
// the end. Prints one JSON object: the message id, the text the deltas
// carried, the final message's text and its stop reason; the Go test
// (../../messages_test.go) checks them against the call's result.
//
//   node anthropic-stream.mjs BASE_URL TOKEN QUESTION
import Anthropic from "@anthropic-ai/sdk";

const [baseURL, apiKey, question] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });
const stream = client.messages.stream({
  model: "auto", max_tokens: 2000, messages: [{ role: "user", content: question }],
});
let id = "";
let text = "";
let deltas = 0;
for await (const ev of stream) {
  if (ev.type === "message_start") id = ev.message.id;
  if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") {
    text += ev.delta.text;
    deltas++;
    if (deltas === 3) console.log("deltas 3");
  }
}
const final = await stream.finalMessage();
console.log(JSON.stringify({
  id, text, deltas,
  final: final.content.filter((b) => b.type === "text").map((b) => b.text).join(""),
  stop_reason: final.stop_reason,
}));
