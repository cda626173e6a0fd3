import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { buildEdge, type Edge, type EdgeOptions } from '../src/index.js';
import { createEdgeMetrics } from '../src/operations/metrics.js';
import { parseEdgeCommand } from '../src/settings/edge-args.js';
import { resolveEdgeOptions } from '../src/settings/edge-options.js';
import { toEdgeOptions } from '../src/settings/settings-to-options.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function listening(options: EdgeOptions): Promise<{ edge: Edge; port: number; logs: string[] }> {
  const logs: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => logs.push(line) });
  const edge = buildEdge({ port: 0, ...options, logger });
  const { port } = await edge.listen();
  cleanups.push(() => edge.close(0));
  return { edge, port, logs };
}

/** A connection from `from` (a loopback address) that has completed its handshake. */
async function open(port: number, from = '127.0.0.1'): Promise<Socket> {
  const socket = connect({ port, host: '127.0.0.1', localAddress: from });
  socket.on('error', () => {});
  cleanups.push(() => socket.destroy());
  await once(socket, 'connect');
  return socket;
}

/** Sends a request and resolves with the answer's status line, or undefined if the edge closed instead. */
function statusLine(socket: Socket): Promise<string | undefined> {
  return new Promise((resolve) => {
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      const end = text.indexOf('\r\n');
      if (end !== -1) resolve(text.slice(0, end));
    });
    socket.on('close', () => resolve(undefined));
    socket.write('GET / HTTP/1.1\r\nHost: localhost\r\n\r\n');
  });
}

async function droppedSeries(edge: Edge): Promise<string[]> {
  const metrics = createEdgeMetrics(edge, 'test');
  const { body } = await metrics.render();
  metrics.close();
  return body.split('\n').filter((l) => l.startsWith('tunnel2_public_connections_dropped_total{'));
}

describe('maxConnectionsPerAddress', () => {
  it('closes a connection beyond the cap at accept, counts it, warns, and serves other addresses', async () => {
    const { edge, port, logs } = await listening({ maxConnectionsPerAddress: 5 });
    const held = await Promise.all(Array.from({ length: 5 }, () => open(port)));
    // Idle connections count as much as busy ones: nothing was sent on these.
    const over = await open(port);
    await once(over, 'close');
    expect(edge.publicConnections.dropped.per_address).toBe(1);
    // Another address is not affected, and the held ones are served.
    expect(await statusLine(await open(port, '127.0.0.2'))).toBe('HTTP/1.1 200 OK');
    expect(await statusLine(held[0]!)).toBe('HTTP/1.1 200 OK');
    // A closed one frees its place (once the edge has seen it close: an attempt before is refused too).
    held[1]!.destroy();
    const refusedMeanwhile = await attemptsUntil(
      async () => (await statusLine(await open(port))) === 'HTTP/1.1 200 OK',
    );
    expect(await droppedSeries(edge)).toEqual([
      'tunnel2_public_connections_dropped_total{reason="open_files"} 0',
      `tunnel2_public_connections_dropped_total{reason="per_address"} ${1 + refusedMeanwhile}`,
    ]);
    const warnings = logs.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(warnings).toEqual([
      expect.objectContaining({ reason: 'per_address', limit: 5, count: 1, level: 40 }),
    ]);
  });

  it('logs a flood once, then the count since the last line at most once per period', async () => {
    const { edge, port, logs } = await listening({ maxConnectionsPerAddress: 1 });
    await open(port);
    for (let i = 0; i < 20; i++) await once(await open(port), 'close');
    expect(edge.publicConnections.dropped.per_address).toBe(20);
    expect(logs).toHaveLength(1);
    // What is still counted is logged when the edge closes.
    await edge.close(0);
    expect(logs.map((l) => (JSON.parse(l) as { count: number }).count)).toEqual([1, 19]);
  });

  it('does not apply to a trusted proxy, which carries many clients', async () => {
    const { edge, port } = await listening({ maxConnectionsPerAddress: 2, trustProxy: ['127.0.0.1'] });
    const sockets = await Promise.all(Array.from({ length: 6 }, () => open(port)));
    for (const socket of sockets) expect(await statusLine(socket)).toBe('HTTP/1.1 200 OK');
    expect(edge.publicConnections.dropped.per_address).toBe(0);
  });

  it('is off by default', async () => {
    const { edge, port } = await listening({});
    const sockets = await Promise.all(Array.from({ length: 50 }, () => open(port)));
    expect(await statusLine(sockets[49]!)).toBe('HTTP/1.1 200 OK');
    expect(edge.publicConnections.dropped.per_address).toBe(0);
  });
});

/** Retries `attempt` until it holds; resolves with the number of failed attempts. */
async function attemptsUntil(attempt: () => Promise<boolean>): Promise<number> {
  let failed = 0;
  while (!(await attempt())) {
    failed++;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return failed;
}

describe('the open-file limit', () => {
  // What Node reports when libuv could not drop the connection itself: an 'error' on the server, which
  // used to have no listener after listen (the process would end). e2e-open-files.test.ts covers the cap.
  it('a failed accept (EMFILE) is counted and warned about, and the edge keeps serving', async () => {
    const { edge, port, logs } = await listening({});
    const failure = Object.assign(new Error('accept EMFILE'), { code: 'EMFILE', syscall: 'accept' });
    edge.publicServer.emit('error', failure);
    expect(edge.publicConnections.dropped.open_files).toBe(1);
    expect(logs.map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ reason: 'open_files', count: 1, level: 40 }),
    ]);
    expect(await statusLine(await open(port))).toBe('HTTP/1.1 200 OK');
  });
});

describe('the maxConnectionsPerAddress setting', () => {
  it('comes from the flag, the variable or the config file, and reaches the edge', async () => {
    const fromFlag = await parseEdgeCommand(['--max-connections-per-address', '300'], {});
    expect(fromFlag.config.settings.maxConnectionsPerAddress).toBe(300);
    const fromEnv = await parseEdgeCommand([], { TUNNEL2_MAX_CONNECTIONS_PER_ADDRESS: '40' });
    expect(resolveEdgeOptions(toEdgeOptions(fromEnv.config.settings, [])).maxConnectionsPerAddress).toBe(40);
    const dir = await mkdtemp(join(tmpdir(), 'tunnel2-caps-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, 'edge.json');
    await writeFile(file, JSON.stringify({ maxConnectionsPerAddress: 7 }));
    expect((await parseEdgeCommand(['--config', file], {})).config.settings.maxConnectionsPerAddress).toBe(7);
    expect((await parseEdgeCommand([], {})).config.settings.maxConnectionsPerAddress).toBe(0);
    await expect(parseEdgeCommand(['--max-connections-per-address', 'many'], {})).rejects.toThrow(
      /maxConnectionsPerAddress/,
    );
  });
});
