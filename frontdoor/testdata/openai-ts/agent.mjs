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
// The same through the Responses API (the Agents SDK's default).
const respTools = [{ type: "function", name: "lookup_order", description: "Find an order by its id", strict: false,
  parameters: tools[0].function.parameters }];

async function respond(input, stream) {
  const params = { model: "auto", instructions: "You are a support agent.", input, tools: respTools, store: false, user };
  if (!stream) return client.responses.create(params);
  return client.responses.stream(params).finalResponse();
}

for (const stream of [false, true]) {
  const input = [{ role: "user", content: `Where is order 42? (responses${stream ? ", streamed" : ""})` }];
  const first = await respond(input, stream);
  const call = first.output.find((item) => item.type === "function_call");
  input.push({ type: "function_call", call_id: call?.call_id, name: call?.name, arguments: call?.arguments });
  input.push({ type: "function_call_output", call_id: call?.call_id, output: "shipped on Monday" });
  const second = await respond(input, stream);
  out[stream ? "responses_streamed" : "responses"] = {
    first_finish: call ? "tool_calls" : first.status,
    first_content: first.output_text,
    tool: call?.name,
    arguments: call?.arguments,
    id: call?.call_id,
    second_finish: second.status === "completed" ? "stop" : second.status,
    second_content: second.output_text,
  };
}
console.log(JSON.stringify(out));
