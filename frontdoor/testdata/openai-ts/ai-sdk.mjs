// The Vercel AI SDK (ai, with the @ai-sdk/openai provider's Responses API
// model, openai.responses(model)) against the front door: generateText,
// streamText, and a tool the model calls before it answers (two steps,
// the second sending the function call's output). Prints one JSON object
// with what the SDK saw; the Go test (../../agents_test.go) checks it.
//
//   node ai-sdk.mjs BASE_URL TOKEN USER
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText, stepCountIs, tool } from "ai";
import { z } from "zod";

const [baseURL, apiKey, user] = process.argv.slice(2);
const openai = createOpenAI({ baseURL, apiKey });
const model = openai.responses("auto");
const providerOptions = { openai: { user } };
const out = {};

const gen = await generateText({ model, providerOptions, maxRetries: 0,
  system: "You are a support agent.", prompt: "Where is my order? (ai sdk)" });
out.generated = { text: gen.text, id: gen.response.id, finish: gen.finishReason, output_tokens: gen.usage.outputTokens };

const st = streamText({ model, providerOptions, maxRetries: 0,
  system: "You are a support agent.", prompt: "[[sim tokens=40]] Tell me about my order. (ai sdk, streamed)" });
let text = "", deltas = 0;
for await (const piece of st.textStream) {
  text += piece;
  deltas++;
}
out.streamed = { text, deltas, final: await st.text, id: (await st.response).id, finish: await st.finishReason };

const calls = [];
const lookup = tool({
  description: "Look up an order by its ID.",
  inputSchema: z.object({ order_id: z.string() }),
  execute: async ({ order_id }) => {
    calls.push(order_id);
    return "shipped on Monday";
  },
});
const agent = await generateText({ model, providerOptions, maxRetries: 0, tools: { lookup_order: lookup }, stopWhen: stepCountIs(3),
  system: "You are a support agent.", prompt: "Where is order 42?" });
out.tool = { text: agent.text, steps: agent.steps.length, calls, id: agent.response.id };
console.log(JSON.stringify(out));
