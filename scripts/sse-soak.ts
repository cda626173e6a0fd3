// SSE soak: proves a Server-Sent Events stream survives a long idle gap through the tunnel with every
// timer at its real default (edge response timeout, session heartbeat, the agent's undici pool, Node's
// server timeouts). An edge, a backend and an agent run in this process on loopback; the backend sends one
// event, stays silent for --idle-ms (default 10 minutes), then sends a second event and ends the stream.
//
//   pnpm build && node scripts/sse-soak.ts [--idle-ms 600000]
//
// Prints one JSON line with the outcome and exits 0 only if both events arrived on the same response.

import { once } from 'node:events';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { connect } from '@tunnel2/cli';
import { buildEdge } from '@tunnel2/edge';
import { pino } from 'pino';

const { values } = parseArgs({ options: { 'idle-ms': { type: 'string', default: '600000' } } });
const idleMs = Number(values['idle-ms']);
if (!Number.isInteger(idleMs) || idleMs < 0) throw new TypeError('--idle-ms must be a whole number');

let backendSawClose = false;
const backend = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.write(`data: ${Date.now()}\n\n`);
  const timer = setTimeout(() => res.end(`data: ${Date.now()}\n\n`), idleMs);
  res.on('close', () => {
    backendSawClose = true;
    clearTimeout(timer);
  });
});
backend.listen(0, '127.0.0.1');
await once(backend, 'listening');
const backendPort = (backend.address() as AddressInfo).port;

const edge = buildEdge({ port: 0, logger: pino({ level: 'warn' }) });
const { port } = await edge.listen();
const tunnel = await connect({ target: backendPort, server: edge.url, subdomain: 'soak' });

const started = Date.now();
const delays: number[] = [];
const outcome = await new Promise<{ ok: boolean; error?: string }>((resolve) => {
  const req = request({
    host: '127.0.0.1',
    port,
    path: '/events',
    headers: { host: `soak.localhost:${port}` },
  });
  req.on('error', (err) => resolve({ ok: false, error: `${(err as { code?: string }).code ?? err.name}` }));
  req.on('response', (res) => {
    let buffer = '';
    res.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
      for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
        delays.push(Date.now() - Number(/data: (\d+)/.exec(buffer.slice(0, end))?.[1]));
        buffer = buffer.slice(end + 2);
      }
    });
    res.on('aborted', () => resolve({ ok: false, error: 'response aborted' }));
    res.on('error', (err) => resolve({ ok: false, error: err.message }));
    res.on('end', () => resolve({ ok: delays.length === 2 }));
  });
  req.end();
});

console.log(
  JSON.stringify({
    scenario: 'sse-idle-soak',
    idleMs,
    elapsedMs: Date.now() - started,
    eventsReceived: delays.length,
    deliveryDelaysMs: delays,
    backendSawClose,
    ...outcome,
  }),
);
await tunnel.close(0);
await edge.close(0);
backend.closeAllConnections();
backend.close();
process.exitCode = outcome.ok ? 0 : 1;
