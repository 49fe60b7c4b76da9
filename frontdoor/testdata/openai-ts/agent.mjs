// An agent's tool round trip with the official OpenAI JavaScript client
// against the front door: offer a tool, get a tool call, send the tool's
// result, get the final answer; streamed and not. Prints one JSON object
// with what the client saw; the Go test (../../agents_test.go) checks it.
//
//   node agent.mjs BASE_URL TOKEN USER
import OpenAI from "openai";

const [baseURL, apiKey, user] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });

const tools = [{
  type: "function",
  function: {
    name: "lookup_order",
    description: "Find an order by its id",
    parameters: { type: "object", properties: { order_id: { type: "string" } }, required: ["order_id"] },
  },
}];

async function turn(messages, stream) {
  const params = { model: "auto", user, messages, tools };
  if (!stream) {
    const c = await client.chat.completions.create(params);
    return { message: c.choices[0].message, finish: c.choices[0].finish_reason };
  }
  const runner = client.chat.completions.stream(params);
  const c = await runner.finalChatCompletion();
  return { message: c.choices[0].message, finish: c.choices[0].finish_reason };
}

const out = {};
for (const stream of [false, true]) {
  const messages = [{ role: "user", content: `Where is order 42?${stream ? " (streamed)" : ""}` }];
  const first = await turn(messages, stream);
  const call = first.message.tool_calls?.[0];
  messages.push(first.message);
  messages.push({ role: "tool", tool_call_id: call?.id, content: "shipped on Monday" });
  const second = await turn(messages, stream);
  out[stream ? "streamed" : "plain"] = {
    first_finish: first.finish,
    first_content: first.message.content,
    tool: call?.function?.name,
    arguments: call?.function?.arguments,
    id: call?.id,
    second_finish: second.finish,
    second_content: second.message.content,
  };
}
console.log(JSON.stringify(out));
