// The official TypeScript Workflow Streams client, driven by the Go
// cross-language tests (../../crosslang_test.go).
//
//   node stream.mjs subscribe --address HOST:PORT --workflow-id ID [--topics a,b] [--from N]
//     prints one JSON line per item: {"offset","topic","encoding","data"
//     (base64 of the payload's data),"value" (decoded by the default payload
//     converter)}, then {"end":true,"count":N} when the subscription ends
//     (the official client ends it when the workflow closes).
//   node stream.mjs publish --address HOST:PORT --workflow-id ID --topic T --count N [--prefix P]
//     publishes P-0 .. P-(N-1) with the official publisher, then disposes
//     of it (which flushes) and prints {"published":N}.
import { Client, Connection } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { WorkflowStreamClient } from '@temporalio/workflow-streams/client';

function parseArgs(argv) {
  const [mode, ...rest] = argv;
  const opts = { mode, namespace: 'default', from: '0', topics: '', prefix: 'ts' };
  for (let i = 0; i < rest.length; i += 2) {
    const key = rest[i].replace(/^--/, '').replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    opts[key] = rest[i + 1];
  }
  if (!opts.address || !opts.workflowId) {
    throw new Error('--address and --workflow-id are required');
  }
  return opts;
}

function print(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const connection = await Connection.connect({ address: opts.address });
  try {
    const client = new Client({ connection, namespace: opts.namespace });
    const stream = WorkflowStreamClient.create(client, opts.workflowId, { batchInterval: '50 milliseconds' });
    if (opts.mode === 'subscribe') {
      const topics = opts.topics === '' ? undefined : opts.topics.split(',');
      let count = 0;
      for await (const item of stream.subscribe(topics, Number(opts.from))) {
        const encoding = new TextDecoder().decode(item.data.metadata?.encoding ?? new Uint8Array());
        print({
          offset: item.offset,
          topic: item.topic,
          encoding,
          data: Buffer.from(item.data.data ?? new Uint8Array()).toString('base64'),
          value: defaultPayloadConverter.fromPayload(item.data),
        });
        count++;
      }
      print({ end: true, count });
    } else if (opts.mode === 'publish') {
      const topic = stream.topic(opts.topic);
      const n = Number(opts.count);
      for (let i = 0; i < n; i++) {
        topic.publish(`${opts.prefix}-${i}`);
      }
      await stream[Symbol.asyncDispose]();
      print({ published: n });
    } else {
      throw new Error(`unknown mode ${opts.mode}`);
    }
  } finally {
    await connection.close();
  }
}

main().catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
});
