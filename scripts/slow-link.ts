// Slow link: a download and an upload through the tunnel when the agent sits a real round trip away from
// the edge, with the default settings, and the download again with the edge's receive-window auto-tuning
// off, side by side in one run. Loopback has no delay to speak of, so a proxy between the agent and the edge
// holds every chunk for half the round trip in each direction. The edge, the backend, the proxy and the
// agent run in this process; the client is curl-like (Node's http).
//
//   pnpm build && node scripts/slow-link.ts [--rtt 50] [--mib 64]      (--delay-ms N is --rtt 2N)
//
// Prints one JSON line: MB/s per run. With fixed 256 KiB windows a stream carries at most 256 KiB per round
// trip (5 MB/s at 50 ms), whatever the link; auto-tuning (on by default) follows the bandwidth-delay product.

import { once } from 'node:events';
import { request } from 'node:http';
import { type AddressInfo, connect as connectTcp, createServer, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import { connect } from '@tunnel2/cli';
import { buildEdge, type EdgeOptions } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { pino } from 'pino';

const { values } = parseArgs({
  options: {
    rtt: { type: 'string', default: '50' },
    'delay-ms': { type: 'string' },
    mib: { type: 'string', default: '64' },
  },
});
const delayMs = values['delay-ms'] === undefined ? Number(values.rtt) / 2 : Number(values['delay-ms']);
const bytes = Number(values.mib) * 2 ** 20;
if (!(delayMs >= 0) || !(bytes > 0))
  throw new TypeError('--rtt, --delay-ms and --mib must be positive numbers');

/** Forwards each chunk after delayMs, keeping order; a link, not a bottleneck (it buffers what it holds). */
function delayed(from: Socket, to: Socket): void {
  from.on('data', (chunk: Buffer) => setTimeout(() => to.write(chunk), delayMs));
  from.on('end', () => setTimeout(() => to.end(), delayMs));
  from.on('error', () => to.destroy());
  from.on('close', () => setTimeout(() => to.destroy(), delayMs));
}

/** MB/s of one exchange: a GET of `bytes`, or a POST of `bytes` to a backend route that discards them. */
async function transfer(port: number, host: string, direction: 'download' | 'upload'): Promise<number> {
  const started = performance.now();
  const upload = direction === 'upload';
  const received = await new Promise<number>((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: upload ? 'POST' : 'GET',
        path: upload ? '/discard' : `/bytes/${bytes}`,
        headers: upload ? { host, 'content-length': String(bytes) } : { host },
      },
      (res) => {
        const chunks: Buffer[] = [];
        let n = 0;
        res.on('data', (chunk: Buffer) => {
          n += chunk.length;
          if (upload) chunks.push(chunk);
        });
        res.on('end', () => resolve(upload ? Number(JSON.parse(Buffer.concat(chunks).toString()).bytes) : n));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (upload) zeros(bytes).pipe(req);
    else req.end();
  });
  if (received !== bytes) throw new Error(`${direction}: ${received} of ${bytes} bytes arrived`);
  return bytes / ((performance.now() - started) / 1000) / 1e6;
}

/** `total` bytes of zeros in 64 KiB chunks, produced only as fast as they are read. */
function zeros(total: number): Readable {
  const chunk = Buffer.alloc(64 * 1024);
  let left = total;
  return new Readable({
    read() {
      const n = Math.min(left, chunk.length);
      left -= n;
      this.push(n === 0 ? null : n === chunk.length ? chunk : chunk.subarray(0, n));
    },
  });
}

async function run(edgeOptions: EdgeOptions, directions: ('download' | 'upload')[]): Promise<number[]> {
  const backend = await createTestBackend();
  const edge = buildEdge({ port: 0, logger: pino({ level: 'warn' }), ...edgeOptions });
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
    const results: number[] = [];
    for (const direction of directions)
      results.push(await transfer(port, `slow.localhost:${port}`, direction));
    return results;
  } finally {
    await tunnel.close();
    link.close();
    await edge.close();
    await backend.close();
  }
}

const round = (n: number | undefined): number => Number((n ?? Number.NaN).toFixed(1));
const [download, upload] = await run({}, ['download', 'upload']);
const [off] = await run({ maxStreamWindow: 0 }, ['download']);
process.stdout.write(
  `${JSON.stringify({
    roundTripMs: 2 * delayMs,
    mib: bytes / 2 ** 20,
    defaults: { downloadMBps: round(download), uploadMBps: round(upload) },
    edgeAutoTuningOff: { downloadMBps: round(off) },
  })}\n`,
);
process.exit(0);
