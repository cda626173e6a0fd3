import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonEvent, startBackendService } from '../src/bench-stack.js';
import { type ChildService, startChildService } from '../src/child-service.js';
import { readStatusKb } from '../src/process-stats.js';

// The floor relay pair (the built relay-floor-process.js, as `pnpm bench floor` and `tcp` run it) between a
// raw client and the test backend: a client that stops reading mid-download must stall the relay, not fill
// its memory (the link and the sockets honour every write()'s verdict), and then get every byte.

const relayBin = fileURLToPath(new URL('../dist/relay-floor-process.js', import.meta.url));
const DOWNLOAD = 512 * 2 ** 20;
const started: ChildService[] = [];
let edge: ChildService;
let agent: ChildService;

const listening = (line: string): string | undefined => {
  const url = jsonEvent(line, 'listening')?.url;
  return typeof url === 'string' ? url : undefined;
};

beforeAll(async () => {
  const backend = await startBackendService();
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
});
