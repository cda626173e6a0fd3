// What a log line costs the edge's process: pino with its own destination (what the edge used before),
// the same JSON through the edge's bounded sink, and the human format through it. 100,000 debug request
// lines to /dev/null, 20 per event-loop turn (as requests arrive), with the edge's redaction paths. Prints the
// time inside the logging calls and the process CPU per line. Build first (`pnpm exec tsc -b`).
//   node packages/edge/scripts/log-cost.ts
import { openSync } from 'node:fs';
import { type Logger, pino } from 'pino';
import { createEdgeLogger, redactedPaths } from '../dist/operations/edge-logger.js';

const fd = openSync('/dev/null', 'w');
const lines = 100_000;
const fields = {
  requestId: '3f9c1a0b7e2d4c55-1a2b',
  session: 'brave-fox',
  method: 'GET',
  url: '/api/items?page=2',
  status: 200,
  durationMs: 12.34,
};

async function measure(name: string, logger: Logger): Promise<void> {
  const flushed = () => new Promise<void>((resolve) => logger.flush(() => resolve()));
  for (let i = 0; i < 2_000; i++) logger.debug(fields, 'request');
  await flushed();
  let inCalls = 0;
  const cpu0 = process.cpuUsage();
  for (let turn = 0; turn < lines / 20; turn++) {
    const started = performance.now();
    for (let i = 0; i < 20; i++) logger.debug(fields, 'request');
    inCalls += performance.now() - started;
    await new Promise((resolve) => setImmediate(resolve));
  }
  await flushed();
  const cpu = process.cpuUsage(cpu0);
  const perLine = (µs: number): string => (µs / lines).toFixed(2);
  console.log(
    `${name}: ${perLine(inCalls * 1000)} µs per line in the logging call, ${perLine(cpu.user + cpu.system)} µs of process CPU per line`,
  );
}

const base = {
  level: 'debug',
  redact: { paths: redactedPaths, censor: '<redacted>' },
  timestamp: pino.stdTimeFunctions.isoTime,
};
await measure('pino.destination (before)', pino(base, pino.destination({ dest: fd, minLength: 0 })));
await measure('JSON through the sink', createEdgeLogger({ level: 'debug', format: 'json', fd }));
await measure(
  'human through the sink',
  createEdgeLogger({ level: 'debug', format: 'pretty', fd, env: {}, terminals: { stdout: true, log: true } }),
);
