// Runs workflows.ts on a task queue until SIGTERM or SIGINT:
//   node worker.mjs <address> <namespace> <task queue>
// It prints "ready" once the workflow bundle is built and the worker polls.
import { fileURLToPath } from 'node:url';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';

const [address, namespace, taskQueue] = process.argv.slice(2);
if (!address || !namespace || !taskQueue) {
  console.error('usage: node worker.mjs <address> <namespace> <task queue>');
  process.exit(2);
}

// Warnings and errors only, on stderr.
Runtime.install({
  logger: new DefaultLogger('WARN'),
  telemetryOptions: { logging: { filter: { core: 'WARN', other: 'WARN' }, forward: {} } },
});

const connection = await NativeConnection.connect({ address });
const worker = await Worker.create({
  connection,
  namespace,
  taskQueue,
  workflowsPath: fileURLToPath(new URL('./workflows.ts', import.meta.url)),
});
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => worker.shutdown());
}
const running = worker.run();
console.log('ready');
await running;
await connection.close();
