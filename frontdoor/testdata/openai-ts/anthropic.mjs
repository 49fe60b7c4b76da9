// Anthropic's official TypeScript client against the front door's Messages
// API: a message created and the same streamed, a tool-use loop (tool_use →
// tool_result → answer) streamed and not, count_tokens, and the error
// envelope of a missing max_tokens, a bad key and a tenant over its limit.
// Prints one JSON object with what the client saw; the Go test
// (../../messages_test.go) checks it.
//
//   node anthropic.mjs BASE_URL TOKEN USER [LIMITED_TOKEN]
import Anthropic from "@anthropic-ai/sdk";

const [baseURL, apiKey, user, limitedKey] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0 });

const out = {};
const system = "You are a support agent.";

// A message, whole and streamed.
const created = await client.messages.create({
  model: "auto", max_tokens: 200, system, metadata: { user_id: user },
  messages: [{ role: "user", content: "When will my parcel arrive?" }],
});
out.created = {
  id: created.id, type: created.type, role: created.role, model: created.model,
  text: created.content.filter((b) => b.type === "text").map((b) => b.text).join(""),
  stop_reason: created.stop_reason, usage: created.usage, source: created.x_resilience?.source,
};

const stream = client.messages.stream({
  model: "auto", max_tokens: 200, system: [{ type: "text", text: system }], metadata: { user_id: user },
  messages: [{ role: "user", content: [{ type: "text", text: "When will my parcel arrive? (streamed)" }] }],
});
let streamed = "";
const events = [];
stream.on("text", (t) => { streamed += t; });
stream.on("streamEvent", (e) => { events.push(e.type); });
const final = await stream.finalMessage();
out.streamed = {
  text: streamed,
  final: final.content.filter((b) => b.type === "text").map((b) => b.text).join(""),
  stop_reason: final.stop_reason, events: [...new Set(events)],
};

// A tool-use loop, whole and streamed.
const tools = [{
  name: "lookup_order", description: "Find an order by its id",
  input_schema: { type: "object", properties: { order_id: { type: "string" } }, required: ["order_id"] },
}];
for (const streamIt of [false, true]) {
  const messages = [{ role: "user", content: `Where is order 42?${streamIt ? " (streamed)" : ""}` }];
  const ask = (msgs) => {
    const params = { model: "auto", max_tokens: 300, system, tools, messages: msgs, metadata: { user_id: user } };
    return streamIt ? client.messages.stream(params).finalMessage() : client.messages.create(params);
  };
  const first = await ask(messages);
  const use = first.content.find((b) => b.type === "tool_use");
  messages.push({ role: "assistant", content: first.content });
  messages.push({ role: "user", content: [{ type: "tool_result", tool_use_id: use?.id, content: "shipped on Monday" }] });
  const second = await ask(messages);
  out[streamIt ? "tools_streamed" : "tools"] = {
    first_stop: first.stop_reason, tool: use?.name, input: use?.input, id: use?.id,
    second_stop: second.stop_reason,
    second_text: second.content.filter((b) => b.type === "text").map((b) => b.text).join(""),
  };
}

// count_tokens.
const counted = await client.messages.countTokens({
  model: "auto", system, messages: [{ role: "user", content: "When will my parcel arrive?" }],
});
out.count = counted.input_tokens;

// Errors, as Anthropic's client surfaces them.
async function failure(fn) {
  try {
    await fn();
    return { status: 0 };
  } catch (e) {
    return { status: e.status, type: e.error?.error?.type, message: e.error?.error?.message, envelope: e.error?.type,
      retry_after: e.headers?.get?.("retry-after") ?? null };
  }
}
out.no_max_tokens = await failure(() => client.messages.create({
  model: "auto", messages: [{ role: "user", content: "hi" }],
}));
out.bad_key = await failure(() => new Anthropic({ baseURL, apiKey: "sk-not-a-tenant", maxRetries: 0 }).messages.create({
  model: "auto", max_tokens: 10, messages: [{ role: "user", content: "hi" }],
}));
out.unknown_model = await failure(() => client.messages.create({
  model: "claude-unknown", max_tokens: 10, messages: [{ role: "user", content: "hi" }],
}));
if (limitedKey) {
  const limited = new Anthropic({ baseURL, apiKey: limitedKey, maxRetries: 0 });
  const ask = () => limited.messages.create({ model: "auto", max_tokens: 10, messages: [{ role: "user", content: "hi there" }] });
  let last = { status: 0 };
  for (let i = 0; i < 10 && last.status !== 429; i++) {
    last = await failure(ask);
  }
  out.over_limit = last;
}
console.log(JSON.stringify(out));
