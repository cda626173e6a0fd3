import { parseArgs } from 'node:util';
import { createTestBackend } from './create-test-backend.js';

const { values } = parseArgs({
  options: { port: { type: 'string', default: '3000' }, host: { type: 'string', default: '127.0.0.1' } },
});
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  process.stderr.write(`test-backend: --port ${values.port} is not a port number\n`);
  process.exit(1);
}
const backend = await createTestBackend({ port, host: values.host });
process.stdout.write(
  `test backend listening on ${backend.url} (GET ${backend.url}/loadtest/info lists endpoints)\n`,
);
const stop = (): void => void backend.close().then(() => process.exit(0));
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
