// A TypeScript agent workflow that calls durable-llm through Nexus.
import * as nexus from 'nexus-rpc';
import { createNexusServiceClient, uuid4 } from '@temporalio/workflow';

// CallRequest and CallResult are durable-llm's JSON (the fields used here).
export interface Message {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
}

export interface CallRequest {
  user_id?: string;
  session_id?: string;
  scenario?: string;
  messages: Message[];
  idempotency_key?: string;
}

export interface Attempt {
  n: number;
  model: string;
  class?: string;
  decision?: string;
}

export interface CallResult {
  request_id: string;
  content: string;
  source: string;
  model?: string;
  degraded: boolean;
  attempts: Attempt[];
}

// The service the durable-llm worker registers: one operation, call.
export const durableLLM = nexus.service('durable-llm', {
  call: nexus.operation<CallRequest, CallResult>(),
});

// askNexus asks durable-llm through the Nexus endpoint and returns its answer.
export async function askNexus(endpoint: string, req: CallRequest): Promise<CallResult> {
  const llm = createNexusServiceClient({ endpoint, service: durableLLM });
  return await llm.executeOperation(
    'call',
    // One call per turn: uuid4 is seeded by the run, so a replay sends the same key.
    { ...req, idempotency_key: req.idempotency_key ?? `nx-ts-${uuid4()}` },
    { scheduleToCloseTimeout: '11 minutes', summary: 'LLM call through Nexus' },
  );
}
