// Slow link: a download through the tunnel when the agent sits a real round trip away from the edge, with
// the edge's receive-window auto-tuning off and on, side by side in one run. Loopback has no delay to speak
// of, so a proxy between the agent and the edge holds every chunk for --delay-ms in each direction. The
// edge, the backend, the proxy and the agent run in this process; the client is curl-like (Node's http).
//
//   pnpm build && node scripts/slow-link.ts [--delay-ms 10] [--mib 64]
//
// Prints one JSON line: MB/s per run and the edge's setting. Without auto-tuning a 256 KiB window carries at
// most 256 KiB per round trip (13 MB/s at 20 ms), whatever the link.

import { once } from 'node:events';
import { request } from 'node:http';
import { type AddressInfo, connect as connectTcp, createServer, type Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { connect } from '@tunnel2/cli';
import { buildEdge } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { pino } from 'pino';

const { values } = parseArgs({
  options: { 'delay-ms': { type: 'string', default: '10' }, mib: { type: 'string', default: '64' } },
});
const delayMs = Number(values['delay-ms']);
const bytes = Number(values.mib) * 2 ** 20;
if (!(delayMs >= 0) || !(bytes > 0)) throw new TypeError('--delay-ms and --mib must be positive numbers');

/** Forwards each chunk after delayMs, keeping order; a link, not a bottleneck (it buffers what it holds). */
function delayed(from: Socket, to: Socket): void {
  from.on('data', (chunk: Buffer) => setTimeout(() => to.write(chunk), delayMs));
  from.on('end', () => setTimeout(() => to.end(), delayMs));
  from.on('error', () => to.destroy());
  from.on('close', () => setTimeout(() => to.destroy(), delayMs));
}

async function download(port: number, host: string): Promise<number> {
  const started = performance.now();
  const received = await new Promise<number>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: `/bytes/${bytes}`, headers: { host } }, (res) => {
      let n = 0;
      res.on('data', (chunk: Buffer) => {
        n += chunk.length;
      });
      res.on('end', () => resolve(n));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
  if (received !== bytes) throw new Error(`${received} of ${bytes} bytes arrived`);
  return bytes / ((performance.now() - started) / 1000) / 1e6;
}

async function run(maxStreamWindow: number): Promise<number> {
  const backend = await createTestBackend();
  const edge = buildEdge({ port: 0, logger: pino({ level: 'warn' }), maxStreamWindow });
  const { port } = await edge.listen();
  const link = createServer((agentSide) => {
    const edgeSide = connectTcp(port, '127.0.0.1');
    delayed(agentSide, edgeSide);
    delayed(edgeSide, agentSide);
  });
  link.listen(0, '127.0.0.1');
  await once(link, 'listening');
  const linkPort = (link.address() as AddressInfo).port;
  const tunnel = await connect({
    target: backend.port,
    server: `http://127.0.0.1:${linkPort}`,
    subdomain: 'slow',
  });
  try {
    // The round-trip samples are taken right after HELLO; give them time to come back over the link.
    await new Promise((resolve) => setTimeout(resolve, 8 * delayMs + 100));
    return await download(port, `slow.localhost:${port}`);
  } finally {
    await tunnel.close();
    link.close();
    await edge.close();
    await backend.close();
  }
}

const off = await run(0);
const on = await run(4 * 1024 * 1024);
process.stdout.write(
  `${JSON.stringify({
    roundTripMs: 2 * delayMs,
    mib: bytes / 2 ** 20,
    downloadMBps: { autoTuningOff: Number(off.toFixed(1)), autoTuningOn: Number(on.toFixed(1)) },
  })}\n`,
);
process.exit(0);
