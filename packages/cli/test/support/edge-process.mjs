// An edge in its own process, built with the options given as JSON in argv[2], so a test can measure its
// memory apart from the test runner's (and a crash shows as an exit). With `--state` as argv[3] it also serves
// a loopback-only state port a test can poll to see what the edge holds: its sessions, their streams and the
// bytes queued towards each agent. Prints one JSON line `{ "event": "listening", "port": n, "statePort"?: m }`
// once listening; SIGTERM closes it gracefully.
// (Plain JS: a child process runs it without the test runner's TypeScript transform.)
import { createServer } from 'node:http';
import { buildEdge } from '@tunnel2/edge';
import { pino } from 'pino';

const options = JSON.parse(process.argv[2] ?? '{}');
const edge = buildEdge({ port: 0, logger: pino({ level: 'silent' }), ...options });
const { port } = await edge.listen();

const state =
  process.argv[3] === '--state'
    ? createServer((_req, res) => {
        const sessions = {};
        for (const connection of edge.sessions.connections()) {
          sessions[connection.name] = {
            streams: connection.session.streams.size,
            bufferedBytes: connection.session.bufferedBytes,
          };
        }
        const links = edge.linkServer;
        const body = JSON.stringify({
          sessions,
          inFlight: edge.inFlight,
          rss: process.memoryUsage.rss(),
          windowBudgetUsed: edge.windowBudget.used,
          ...(links === undefined
            ? {}
            : { links: links.size, linkStreams: links.streams, linkBufferedBytes: links.bufferedBytes }),
        });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        res.end(body);
      })
    : undefined;
if (state !== undefined)
  await new Promise((resolve) => state.listen(0, '127.0.0.1', () => resolve(undefined)));

process.stdout.write(
  `${JSON.stringify({ event: 'listening', port, ...(state === undefined ? {} : { statePort: state.address().port }) })}\n`,
);
process.on('SIGTERM', () => {
  state?.close();
  state?.closeAllConnections();
  void edge.close(1_000).then(() => process.exit(0));
});
