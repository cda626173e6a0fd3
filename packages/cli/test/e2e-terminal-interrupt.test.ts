import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildEdge } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterEach, describe, expect, it } from 'vitest';
import { send } from './support/http-client.js';
import { type PtyCli, ptyCli } from './support/pty-cli.js';
import { silent } from './support/stack.js';
import { portRange, startEchoServer } from './support/tcp-stack.js';

// Issue "The everyday loop, polished", 2: Ctrl-C with requests in flight, a second Ctrl-C, and a resize, as a
// user at a real terminal sees them (a pty: Ctrl-C is typed, so the terminal echoes ^C and sends SIGINT).

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A backend that holds every request until `release()`: a slow request, in flight as long as the test wants. */
async function heldBackend() {
  const held: ServerResponse[] = [];
  const arrivals: (() => void)[] = [];
  const server = createServer((_req: IncomingMessage, res: ServerResponse) => {
    held.push(res);
    for (const arrived of arrivals.splice(0)) arrived();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(() => {
    server.closeAllConnections();
    server.close();
  });
  return {
    port: (server.address() as AddressInfo).port,
    /** Resolves once `count` requests are held. */
    async arrived(count: number): Promise<void> {
      while (held.length < count) await new Promise<void>((resolve) => arrivals.push(resolve));
    },
    release(): void {
      for (const res of held.splice(0)) res.end('done\n');
    },
  };
}

async function edge() {
  const server = buildEdge({ port: 0, logger: silent });
  const { port, url } = await server.listen();
  cleanups.push(() => server.close(0));
  return { port, url };
}

function agentInPty(args: string[], columns = 120, rows = 20): PtyCli {
  const agent = ptyCli(args, { columns, rows });
  cleanups.push(() => agent.kill());
  return agent;
}

const ESC = String.fromCharCode(27);

/**
 * The view's whole frame for a window of `rows` came (its scroll region set, then the cursor shown again): a
 * header line of the new width alone may still be a frame drawn for the old size, which came after the resize.
 */
function laidOut(agent: PtyCli, rows: number): boolean {
  const raw = agent.raw();
  const region = raw.lastIndexOf(`${ESC}[5;${rows}r`);
  return region !== -1 && raw.indexOf(`${ESC}[?25h`, region) !== -1;
}

const online = (l: string[]) => /^tunnel2 {2}online/.test(l[0] ?? '');
const SGR = new RegExp(`${ESC}\\[[0-9;]*m`, 'g');

/** The terminal as the shell gets it back: no scroll region, the cursor shown, colours reset. */
function expectTerminalRestored(raw: string): void {
  const lastRegion = Math.max(
    ...[...raw.matchAll(new RegExp(`${ESC}\\[\\d+;\\d+r`, 'g'))].map((m) => m.index),
  );
  expect(raw.lastIndexOf(`${ESC}[r`)).toBeGreaterThan(lastRegion);
  expect(raw.lastIndexOf(`${ESC}[?25h`)).toBeGreaterThan(raw.lastIndexOf(`${ESC}[?25l`));
  expect([...raw.matchAll(SGR)].at(-1)?.[0]).toBe(`${ESC}[0m`);
}

describe('Ctrl-C at a terminal (a real pty)', () => {
  it('first Ctrl-C with a request in flight: the header and the log say finishing 1 request, it completes, exit 0', async () => {
    const backend = await heldBackend();
    const { port, url } = await edge();
    const agent = agentInPty([
      'http',
      String(backend.port),
      '--server',
      url,
      '--subdomain',
      'ctrlc1',
      '--no-inspect',
    ]);
    await agent.waitForScreen(online, 'online');
    const answer = send({ port, path: '/slow', headers: ['Host', `ctrlc1.localhost:${port}`] });
    await backend.arrived(1);
    agent.ctrlC();
    const finishing = 'finishing 1 request (Ctrl-C again to stop now)';
    const screen = await agent.waitForScreen(
      (l) => (l[0] ?? '').includes(finishing) && l.includes(`tunnel2: ${finishing}`),
      'the header and the log line saying what is finishing',
    );
    expect(screen[0]).toMatch(/^tunnel2 {2}finishing 1 request \(Ctrl-C again to stop now\) {3}rtt /);
    // The terminal's echo of ^C ends its line: what the CLI says next starts on a line of its own.
    expect(screen).toContain('^C');
    expect(screen.filter((line) => /\^C./.test(line))).toEqual([]);

    backend.release();
    const res = await answer;
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe('done\n');
    expect(await agent.exited).toBe(0);
    const end = agent.terminal.lines().filter((line) => line !== '');
    expect(end.some((line) => /GET {5}\/slow {2}200/.test(line))).toBe(true);
    expect(end.at(-1)).toBe('tunnel2: closed');
    expectTerminalRestored(agent.raw());
  });

  it('second Ctrl-C: exits 130 without waiting for the request, the terminal restored, one line saying what was cut', async () => {
    const backend = await heldBackend();
    const { port, url } = await edge();
    const agent = agentInPty([
      'http',
      String(backend.port),
      '--server',
      url,
      '--subdomain',
      'ctrlc2',
      '--no-inspect',
    ]);
    await agent.waitForScreen(online, 'online');
    const answers = [0, 1].map(() =>
      send({ port, path: '/slow', headers: ['Host', `ctrlc2.localhost:${port}`] }).then(
        (res) => res.status,
        () => 'failed',
      ),
    );
    await backend.arrived(2);
    agent.ctrlC();
    await agent.waitForScreen(
      (l) => l.includes('tunnel2: finishing 2 requests (Ctrl-C again to stop now)'),
      'finishing',
    );
    agent.ctrlC();
    // The backend still holds both requests: the CLI did not wait for them.
    expect(await agent.exited).toBe(130);
    const end = agent.terminal.lines().filter((line) => line !== '');
    expect(end.at(-1)).toBe('tunnel2: stopped now; 2 requests in flight were cut short');
    expect(end.filter((line) => line.startsWith('tunnel2: stopped now'))).toHaveLength(1);
    expect(end.filter((line) => /\^C./.test(line))).toEqual([]);
    expectTerminalRestored(agent.raw());
    // The clients hear an error, not a hang.
    for (const status of await Promise.all(answers)) expect(status).not.toBe(200);
  });

  it('--no-tty on a terminal: the same two steps in the plain log, ^C on a line of its own', async () => {
    const backend = await heldBackend();
    const { port, url } = await edge();
    const agent = agentInPty([
      'http',
      String(backend.port),
      '--server',
      url,
      '--subdomain',
      'ctrlcplain',
      '--no-inspect',
      '--no-tty',
    ]);
    await agent.waitForScreen((l) => l.some((line) => line.startsWith('tunnel2: forwarding')), 'the URL');
    void send({ port, path: '/slow', headers: ['Host', `ctrlcplain.localhost:${port}`] }).catch(() => {});
    await backend.arrived(1);
    agent.ctrlC();
    await agent.waitForScreen(
      (l) => l.includes('tunnel2: finishing 1 request (Ctrl-C again to stop now)'),
      'the line saying what is finishing',
    );
    agent.ctrlC();
    expect(await agent.exited).toBe(130);
    const end = agent.terminal.lines().filter((line) => line !== '');
    // The cut request's own line, then the closing one (stdout's batched lines go out before stderr's).
    expect(
      end.slice(-5).map((line) => line.replace(/^\d\d:\d\d:\d\d {2}(.*) \d+\.\d ms/, '$1 N ms')),
    ).toEqual([
      '^C',
      'tunnel2: finishing 1 request (Ctrl-C again to stop now)',
      '^C',
      'GET     /slow  ---  N ms  (session closed)',
      'tunnel2: stopped now; 1 request in flight was cut short',
    ]);
    expect(agent.raw()).not.toContain('\x1b');
  });

  it('first Ctrl-C, and a request that never ends: cut when the grace (5 s) runs out, exit 0, and said so', async () => {
    const backend = await heldBackend();
    const { port, url } = await edge();
    const agent = agentInPty([
      'http',
      String(backend.port),
      '--server',
      url,
      '--subdomain',
      'ctrlcgrace',
      '--no-inspect',
    ]);
    await agent.waitForScreen(online, 'online');
    const answer = send({ port, path: '/never', headers: ['Host', `ctrlcgrace.localhost:${port}`] }).then(
      (res) => res.status,
      () => 'failed',
    );
    await backend.arrived(1);
    agent.ctrlC();
    expect(await agent.exited).toBe(0);
    const end = agent.terminal.lines().filter((line) => line !== '');
    expect(end.at(-1)).toBe('tunnel2: closed; 1 request still in flight after 5 s was cut short');
    expectTerminalRestored(agent.raw());
    expect(await answer).not.toBe(200);
  });

  it('Ctrl-C with nothing in flight: closes at once, exit 0, ^C on its own line', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const { url } = await edge();
    const agent = agentInPty([
      'http',
      String(backend.port),
      '--server',
      url,
      '--subdomain',
      'ctrlc0',
      '--no-inspect',
    ]);
    await agent.waitForScreen(online, 'online');
    agent.ctrlC();
    expect(await agent.exited).toBe(0);
    const end = agent.terminal.lines().filter((line) => line !== '');
    expect(end.slice(-2)).toEqual(['^C', 'tunnel2: closed']);
    expect(agent.raw()).not.toContain('finishing');
    expectTerminalRestored(agent.raw());
  });

  it('tunnel2 tcp: the same two steps, counting connections', async () => {
    const echo = await startEchoServer();
    cleanups.push(() => echo.server.close());
    const server = buildEdge({ port: 0, logger: silent, tcpPorts: portRange() });
    const { url } = await server.listen();
    cleanups.push(() => server.close(0));
    const agent = agentInPty(['tcp', String(echo.port), '--server', url]);
    const screen = await agent.waitForScreen(
      (l) => online(l) && l.some((line) => / {2}tcp:\/\//.test(line)),
      'the public port',
    );
    const publicPort = Number(/:(\d+) ->/.exec(screen.find((line) => line.includes('tcp://')) ?? '')?.[1]);
    const client = connect(publicPort, '127.0.0.1');
    client.on('error', () => {});
    cleanups.push(() => client.destroy());
    client.write('ping');
    // The echo answered: the connection is open end to end.
    await once(client, 'data');
    // Not events.once: it would reject on the reset's 'error', which comes first.
    const ended = new Promise((resolve) => client.on('close', resolve));
    agent.ctrlC();
    await agent.waitForScreen(
      (l) => (l[0] ?? '').includes('finishing 1 connection (Ctrl-C again to stop now)'),
      'the header saying finishing 1 connection',
    );
    agent.ctrlC();
    expect(await agent.exited).toBe(130);
    const end = agent.terminal.lines().filter((line) => line !== '');
    expect(end.at(-1)).toBe('tunnel2: stopped now; 1 connection in flight was cut short');
    expectTerminalRestored(agent.raw());
    await ended;
  });

  it('tunnel2 start: the session of a file with HTTP and TCP tunnels, counted together', async () => {
    const backend = await heldBackend();
    const echo = await startEchoServer();
    cleanups.push(() => echo.server.close());
    const server = buildEdge({ port: 0, logger: silent, tcpPorts: portRange() });
    const { port, url } = await server.listen();
    cleanups.push(() => server.close(0));
    const dir = await mkdtemp(join(tmpdir(), 'tunnel2-ctrlc-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const config = join(dir, 'tunnel2.yml');
    await writeFile(
      config,
      [
        `server: ${url}`,
        'tunnels:',
        `  web: { target: ${backend.port}, subdomain: ctrlcweb, inspect: false }`,
        `  db: { proto: tcp, target: ${echo.port} }`,
      ].join('\n'),
    );
    const agent = agentInPty(['start', '--all', '--config', config]);
    await agent.waitForScreen((l) => online(l) && l.some((line) => line.startsWith('  db ')), 'both rows');
    const answer = send({ port, path: '/slow', headers: ['Host', `ctrlcweb.localhost:${port}`] });
    await backend.arrived(1);
    agent.ctrlC();
    await agent.waitForScreen(
      (l) => l.includes('tunnel2: finishing 1 request or connection (Ctrl-C again to stop now)'),
      'the log line saying what is finishing',
    );
    backend.release();
    expect((await answer).status).toBe(200);
    expect(await agent.exited).toBe(0);
    expect(
      agent.terminal
        .lines()
        .filter((line) => line !== '')
        .at(-1),
    ).toBe('tunnel2: closed');
    expectTerminalRestored(agent.raw());
  });

  it('a resize keeps the request lines that were on screen', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const { port, url } = await edge();
    const agent = agentInPty([
      'http',
      String(backend.port),
      '--server',
      url,
      '--subdomain',
      'keeplines',
      '--no-inspect',
    ]);
    await agent.waitForScreen(online, 'online');
    for (let i = 0; i < 3; i++) {
      const res = await send({
        port,
        path: `/loadtest/ping?n=${i}`,
        headers: ['Host', `keeplines.localhost:${port}`],
      });
      expect(res.status).toBe(200);
    }
    const requestLines = (l: string[]) =>
      l.filter((line) => /GET {5}\/loadtest\/ping\?n=\d {2}200/.test(line));
    await agent.waitForScreen((l) => requestLines(l).length === 3, 'three request lines');
    agent.resize(90, 14);
    const after = await agent.waitForScreen(
      (l) => l[3] === '─'.repeat(90) && laidOut(agent, 14),
      'the screen laid out again for 90 x 14',
    );
    expect(requestLines(after).map((line) => /n=(\d)/.exec(line)?.[1])).toEqual(['0', '1', '2']);
    agent.resize(70, 7);
    const smaller = await agent.waitForScreen(
      (l) => l[3] === '─'.repeat(70) && laidOut(agent, 7),
      'the screen laid out again for 70 x 7',
    );
    // Three rows below the header, the last one for the cursor: the latest lines stay.
    expect(requestLines(smaller).map((line) => /n=(\d)/.exec(line)?.[1])).toEqual(['1', '2']);
    agent.ctrlC();
    expect(await agent.exited).toBe(0);
  });
});
