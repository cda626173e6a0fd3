import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chunkedUpload, download } from '../src/measure/bulk-client.js';
import { readStatusKb } from '../src/measure/process-stats.js';
import { jsonEvent, type LoadTarget, startBackendService, targetOf } from '../src/stacks/bench-stack.js';
import { type ChildService, startChildService } from '../src/stacks/child-service.js';

// The floor relay pair (the built relay-floor-process.js, as `pnpm bench floor`, `tcp` and `bulk` run it)
// between a raw client and the test backend: a client that stops reading mid-download, or a backend that
// stops reading mid-upload, must stall the relay, not fill its memory (the link and the sockets honour every
// write()'s verdict), and then every byte must arrive.

const relayBin = fileURLToPath(new URL('../dist/processes/relay-floor-process.js', import.meta.url));
const DOWNLOAD = 512 * 2 ** 20;
const UPLOAD = 512 * 2 ** 20;
const started: ChildService[] = [];
let backend: ChildService;
let edge: ChildService;
let agent: ChildService;

const listening = (line: string): string | undefined => {
  const url = jsonEvent(line, 'listening')?.url;
  return typeof url === 'string' ? url : undefined;
};

beforeAll(async () => {
  backend = await startBackendService();
  started.push(backend);
  agent = await startChildService({
    name: 'relay agent',
    args: [relayBin, '--role', 'agent', '--backend', backend.readyValue],
    ready: listening,
  });
  started.push(agent);
  edge = await startChildService({
    name: 'relay edge',
    args: [relayBin, '--role', 'edge', '--upstream', agent.readyValue],
    ready: listening,
  });
  started.push(edge);
});
afterAll(async () => {
  for (const service of started.reverse()) await service.stop();
});

const rssMb = (service: ChildService): number => (readStatusKb(service.pid, 'VmRSS') ?? Number.NaN) / 1024;

describe('floor relay', () => {
  it('a client that stops reading stalls a 512 MiB download without growing the relay, then gets every byte', async () => {
    const port = Number(new URL(edge.readyValue).port);
    const client = connect(port, '127.0.0.1');
    client.write(`GET /bytes/${DOWNLOAD} HTTP/1.1\r\nhost: bench\r\nconnection: close\r\n\r\n`);
    let received = 0;
    await new Promise<void>((first) =>
      client.once('data', (chunk: Buffer) => {
        received += chunk.length;
        client.pause();
        first();
      }),
    );
    const start = [rssMb(edge), rssMb(agent)];
    let growth = 0;
    // 2 s of a stalled client, sampled (there is no event for memory that does not grow): unbounded, the
    // backend would have pushed most of the 512 MiB into the relay by then.
    for (let i = 0; i < 20; i++) {
      await new Promise((tick) => setTimeout(tick, 100));
      growth = Math.max(growth, rssMb(edge) - start[0]!, rssMb(agent) - start[1]!);
    }
    expect(growth).toBeLessThan(48);
    const closed = new Promise<void>((done) => client.once('close', () => done()));
    client.on('data', (chunk: Buffer) => {
      received += chunk.length;
    });
    client.resume();
    await closed;
    // The answer's head and every body byte.
    expect(received).toBeGreaterThan(DOWNLOAD);
    expect(received).toBeLessThan(DOWNLOAD + 1024);
  }, 60_000);

  it('a backend that stops reading stalls a 512 MiB upload without growing the relay, then gets every byte', async () => {
    // The backend is a server of this test, so it can stop reading (the test backend always reads).
    const sink = createServer();
    sink.listen(0, '127.0.0.1');
    await once(sink, 'listening');
    const accepted = once(sink, 'connection') as Promise<[Socket]>;
    const pair: ChildService[] = [];
    try {
      const backendUrl = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;
      const upAgent = await startChildService({
        name: 'relay agent (stalled backend)',
        args: [relayBin, '--role', 'agent', '--backend', backendUrl],
        ready: listening,
      });
      pair.push(upAgent);
      const upEdge = await startChildService({
        name: 'relay edge (stalled backend)',
        args: [relayBin, '--role', 'edge', '--upstream', upAgent.readyValue],
        ready: listening,
      });
      pair.push(upEdge);
      const client = connect(Number(new URL(upEdge.readyValue).port), '127.0.0.1');
      await once(client, 'connect');
      // The relay opens the backend connection on the stream's first bytes; it stays paused until resumed.
      const chunk = Buffer.alloc(256 * 1024, 0x5a);
      let sent = 0;
      const sending = (async () => {
        while (sent < UPLOAD) {
          const ok = client.write(chunk);
          sent += chunk.length;
          if (!ok) await once(client, 'drain');
        }
      })();
      const [backendSocket] = await accepted;
      backendSocket.pause();
      const start = [rssMb(upEdge), rssMb(upAgent)];
      let growth = 0;
      // 2 s of a stalled backend, sampled as in the download case above.
      for (let i = 0; i < 20; i++) {
        await new Promise((tick) => setTimeout(tick, 100));
        growth = Math.max(growth, rssMb(upEdge) - start[0]!, rssMb(upAgent) - start[1]!);
      }
      expect(growth).toBeLessThan(48);
      // What the client got in stalled: the sockets' kernel buffers and high-water marks, not the body.
      expect(sent).toBeLessThan(96 * 2 ** 20);
      let received = 0;
      backendSocket.on('data', (data: Buffer) => {
        received += data.length;
      });
      backendSocket.resume();
      await sending;
      client.end();
      await once(backendSocket, 'end');
      expect(received).toBe(UPLOAD);
    } finally {
      for (const service of pair.reverse()) await service.stop();
      sink.close();
    }
  }, 60_000);

  it('carries 8 concurrent downloads and uploads byte for byte (payloads split across reads, streams interleaved)', async () => {
    const relay: LoadTarget = { ...targetOf(edge.readyValue), host: 'bench' };
    const direct: LoadTarget = { ...targetOf(backend.readyValue), host: 'bench' };
    const bodyHash = async (target: LoadTarget, bytes: number): Promise<string> => {
      const hash = createHash('sha256');
      await download(target, `/bytes/${bytes}`, { onBody: (chunk) => hash.update(chunk) });
      return hash.digest('hex');
    };
    // Odd sizes, so frame edges fall anywhere in the link's reads.
    const sizes = [1, 4093, 65_537, 1_000_003, 3 * 2 ** 20 + 5, 8 * 2 ** 20 - 3, 12_345_678, 2 ** 20];
    const [viaRelay, viaDirect] = await Promise.all([
      Promise.all(sizes.map((n) => bodyHash(relay, n))),
      Promise.all(sizes.map((n) => bodyHash(direct, n))),
    ]);
    expect(viaRelay).toEqual(viaDirect);
    const uploads = sizes.map((n) => randomBytes(Math.min(n, 4 * 2 ** 20) + 7));
    const answers = await Promise.all(uploads.map((body) => chunkedUpload(relay, '/upload', [body])));
    expect(answers.map((a) => JSON.parse(a.text) as unknown)).toEqual(
      uploads.map((body) => ({
        bytes: body.length,
        sha256: createHash('sha256').update(body).digest('hex'),
      })),
    );
  }, 60_000);

  it('reassembles headers split across reads (7-byte reads at the edge) and stays byte-exact', async () => {
    const tiny = await startChildService({
      name: 'relay agent (tiny reads)',
      args: [relayBin, '--role', 'agent', '--backend', backend.readyValue],
      ready: listening,
    });
    started.push(tiny);
    const tinyEdge = await startChildService({
      name: 'relay edge (tiny reads)',
      args: [relayBin, '--role', 'edge', '--upstream', tiny.readyValue, '--read-bytes', '7'],
      ready: listening,
    });
    started.push(tinyEdge);
    const target: LoadTarget = { ...targetOf(tinyEdge.readyValue), host: 'bench' };
    const direct: LoadTarget = { ...targetOf(backend.readyValue), host: 'bench' };
    const body = async (t: LoadTarget): Promise<string> => {
      const hash = createHash('sha256');
      await download(t, '/bytes/200003', { onBody: (chunk) => hash.update(chunk) });
      return hash.digest('hex');
    };
    expect(await Promise.all([body(target), body(target)])).toEqual([await body(direct), await body(direct)]);
  }, 60_000);
});
