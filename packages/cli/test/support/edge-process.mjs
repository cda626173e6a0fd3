// An edge in its own process, built with the options given as JSON in argv[2], so a test can measure its
// memory apart from the test runner's. Prints one JSON line `{ "port": n }` once listening; SIGTERM closes
// it gracefully. (Plain JS: a child process runs it without the test runner's TypeScript transform.)
import { buildEdge } from '@tunnel2/edge';
import { pino } from 'pino';

const options = JSON.parse(process.argv[2] ?? '{}');
const edge = buildEdge({ port: 0, logger: pino({ level: 'silent' }), ...options });
const { port } = await edge.listen();
process.stdout.write(`${JSON.stringify({ event: 'listening', port })}\n`);
process.on('SIGTERM', () => {
  void edge.close(1_000).then(() => process.exit(0));
});
