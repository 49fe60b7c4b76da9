// The OpenAI Agents SDK against the front door: a support agent with a
// function tool runs two turns, the second continuing the first with
// previousResponseId (the server keeps the conversation). Prints JSON.
// Usage: OPENAI_BASE_URL=... OPENAI_API_KEY=... node agents-sdk.mjs
import { Agent, run, tool, setOpenAIAPI, setTracingDisabled } from '@openai/agents';
import { z } from 'zod';

setTracingDisabled(true);
setOpenAIAPI('responses');

const calls = [];
const lookup = tool({
  name: 'lookup_order',
  description: 'Find an order by its id',
  parameters: z.object({ order_id: z.string() }),
  execute: async ({ order_id }) => {
    calls.push(order_id);
    return 'shipped on Monday';
  },
});
const agent = new Agent({ name: 'support', instructions: 'You are a support agent.', tools: [lookup], model: 'auto' });

const first = await run(agent, 'Where is order 42?');
const second = await run(agent, 'Where is order 42? Tell me again.', { previousResponseId: first.lastResponseId });
console.log(JSON.stringify({
  first: first.finalOutput, first_id: first.lastResponseId,
  second: second.finalOutput, second_id: second.lastResponseId, tool_calls: calls,
}));
