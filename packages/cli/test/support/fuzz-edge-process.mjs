// The fuzzer's edge: a real edge in its own process (so a crash shows as an exit and RSS is the edge's alone),
// built with the options given as JSON in argv[2], plus a loopback-only state port the fuzzer polls to see what
// the edge holds: its sessions, their streams and the bytes queued towards each agent. Prints one JSON line
// `{ "event": "listening", "port": n, "statePort": m }`. SIGTERM closes it gracefully.
// (Plain JS: a child process runs it without the test runner's TypeScript transform.)
import { createServer } from 'node:http';
import { buildEdge } from '@tunnel2/edge';
import { pino } from 'pino';

const options = JSON.parse(process.argv[2] ?? '{}');
const edge = buildEdge({ port: 0, logger: pino({ level: 'silent' }), ...options });
const { port } = await edge.listen();

const state = createServer((_req, res) => {
  const sessions = {};
  for (const connection of edge.sessions.connections()) {
    sessions[connection.name] = {
      streams: connection.session.streams.size,
      bufferedBytes: connection.session.bufferedBytes,
    };
  }
  const body = JSON.stringify({ sessions, inFlight: edge.inFlight, rss: process.memoryUsage.rss() });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
});
await new Promise((resolve) => state.listen(0, '127.0.0.1', () => resolve(undefined)));
const statePort = state.address().port;

process.stdout.write(`${JSON.stringify({ event: 'listening', port, statePort })}\n`);
process.on('SIGTERM', () => {
  state.close();
  state.closeAllConnections();
  void edge.close(1_000).then(() => process.exit(0));
});
