import { parseArgs } from 'node:util';
import { createTestBackend } from './create-test-backend.js';
import { endpoints } from './routes.js';

const USAGE = `usage: tunnel2-test-backend [--port 3000] [--host 127.0.0.1]

A small, fast HTTP backend for tunnel2 tests and load tests. Endpoints:
${endpoints.map((e) => `  ${e.methods === 'ANY' ? 'ANY' : e.methods.join('|')} ${e.path}`).join('\n')}
`;

function fail(message: string): never {
  process.stderr.write(`tunnel2-test-backend: ${message}\n\n${USAGE}`);
  process.exit(2);
}

let values: { port: string; host: string; help?: boolean };
try {
  ({ values } = parseArgs({
    options: {
      port: { type: 'string', short: 'p', default: '3000' },
      host: { type: 'string', short: 'H', default: '127.0.0.1' },
      help: { type: 'boolean', short: 'h' },
    },
  }));
} catch (err) {
  fail((err as Error).message);
}
if (values.help === true) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const port = /^\d{1,5}$/.test(values.port) ? Number(values.port) : Number.NaN;
if (!(port <= 65_535)) fail(`--port ${values.port} is not a port number`);

let backend: Awaited<ReturnType<typeof createTestBackend>>;
try {
  backend = await createTestBackend({ port, host: values.host });
} catch (err) {
  process.stderr.write(
    `tunnel2-test-backend: cannot listen on ${values.host}:${port}: ${(err as Error).message}\n`,
  );
  process.exit(1);
}
process.stdout.write(
  `test backend listening on ${backend.url} (GET ${backend.url}/loadtest/info lists the endpoints)\n`,
);

let stopping = false;
const stop = (): void => {
  // A second signal while closing means "now".
  if (stopping) process.exit(1);
  stopping = true;
  void backend.close().then(() => process.exit(0));
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
