// The Vercel AI SDK's ordinary multi-turn chat against the front door:
// generateText, then generateText again with the conversation so far
// (the question, the first turn's response.messages) and a new question. With its default store: true,
// the SDK names the earlier assistant turn by its item ID (an
// item_reference input item) instead of sending its text. Then the same
// across turns of a tool loop: turn one calls the tool and answers, turn
// two (the first turn's messages and a new question) calls it again.
// Prints one JSON object with what the SDK saw and sent; the Go test
// (../../agents_test.go) checks it.
//
//   node ai-sdk-chat.mjs BASE_URL TOKEN USER
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, stepCountIs, tool } from "ai";
import { z } from "zod";

const [baseURL, apiKey, user] = process.argv.slice(2);
// Every request body the SDK sends, to see which items it names by ID.
let bodies = [];
const openai = createOpenAI({ baseURL, apiKey, fetch: async (url, init) => {
  if (typeof init?.body === "string") bodies.push(JSON.parse(init.body));
  return fetch(url, init);
} });
const model = openai.responses("auto");
const providerOptions = { openai: { user } };
const system = "You are a support agent.";
// turn summarises a generateText result and the item IDs its requests
// sent as item_reference items.
const turn = (r) => {
  const references = bodies.flatMap((b) => (Array.isArray(b.input) ? b.input : []))
    .filter((it) => it.type === "item_reference").map((it) => it.id);
  bodies = [];
  return { text: r.text, id: r.response.id, steps: r.steps.length, references };
};
const out = {};

// The chat as the SDK's documentation keeps it: the user's turns, and
// after each answer its response.messages.
const chat = [{ role: "user", content: "Where is my parcel? (ai sdk chat)" }];
const first = await generateText({ model, providerOptions, maxRetries: 0, system, messages: chat });
const firstTurn = turn(first);
chat.push(...first.response.messages, { role: "user", content: "And when will it arrive? (ai sdk chat)" });
const second = await generateText({ model, providerOptions, maxRetries: 0, system, messages: chat });
out.chat = [firstTurn, turn(second)];

const calls = [];
const tools = { lookup_order: tool({
  description: "Look up an order by its ID.",
  inputSchema: z.object({ order_id: z.string() }),
  execute: async ({ order_id }) => {
    calls.push(order_id);
    return `order ${order_id} shipped on Monday`;
  },
}) };
const agent = [{ role: "user", content: "Where is order 42?" }];
const one = await generateText({ model, providerOptions, maxRetries: 0, system, tools, stopWhen: stepCountIs(3), messages: agent });
const oneTurn = turn(one);
agent.push(...one.response.messages, { role: "user", content: "And where is order 43?" });
const two = await generateText({ model, providerOptions, maxRetries: 0, system, tools, stopWhen: stepCountIs(3), messages: agent });
out.tools = { turns: [oneTurn, turn(two)], calls };
console.log(JSON.stringify(out));
