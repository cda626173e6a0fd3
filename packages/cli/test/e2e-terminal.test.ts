import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildEdge } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterEach, describe, expect, it } from 'vitest';
import { send } from './support/http-client.js';
import { spawnCli, startEdgeProcess } from './support/processes.js';
import { ptyCli } from './support/pty-cli.js';
import { silent, until } from './support/stack.js';
import { portRange, sendAndHash, startHashServer } from './support/tcp-stack.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function stack() {
  const backend = await createTestBackend();
  cleanups.push(() => backend.close());
  const edge = buildEdge({ port: 0, logger: silent });
  const { port, url } = await edge.listen();
  cleanups.push(() => edge.close(0));
  return { backend, port, url };
}

function ping(port: number, name: string) {
  return send({ port, path: '/loadtest/ping', headers: ['Host', `${name}.localhost:${port}`] });
}

// Built from a string: the linter refuses control characters in a regex literal.
/** `tunnel2 http` for the backend, through the edge at `url`, as `name`, under a pty. */
function agentInPty(
  backendPort: number,
  url: string,
  name: string,
  extra: readonly string[],
  options?: Parameters<typeof ptyCli>[1],
) {
  return ptyCli(['http', String(backendPort), '--server', url, '--subdomain', name, ...extra], options);
}

const SGR = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`);
const has = (text: string) => (lines: string[]) => lines.some((line) => line.includes(text));

describe('the terminal view (a real pty)', () => {
  it('shows a header with URL, target, state and round trip above the request lines, and leaves the terminal clean', async () => {
    const { backend, port, url } = await stack();
    const agent = agentInPty(backend.port, url, 'ttyhead', ['--no-inspect']);
    cleanups.push(() => agent.kill());
    const publicUrl = `http://ttyhead.localhost:${port}/`;
    // The round trip appears once the session's first PINGs came back.
    const first = await agent.waitForScreen((l) => /rtt \d/.test(l[0] ?? ''), 'a round trip');
    expect(first[0]).toMatch(/^tunnel2 {2}online {3}rtt \d+(\.\d)? ms {3}requests 0 \(0\/min\) {3}open 0$/);
    expect(first[1]).toBe(`  ${publicUrl} -> http://localhost:${backend.port}`);
    expect(first[2]).toBe(`  also http://localhost:${port}/session/ttyhead/`);
    expect(first[3]).toMatch(/^─+$/);

    for (let i = 0; i < 3; i++) expect((await ping(port, 'ttyhead')).status).toBe(200);
    const after = await agent.waitForScreen(
      (l) => (l[0] ?? '').includes('requests 3 (3/min)'),
      'three requests',
    );
    // The request lines scroll below the header, in the plain log's layout.
    const log = after.slice(4).filter((line) => line !== '');
    expect(log).toHaveLength(3);
    for (const line of log)
      expect(line).toMatch(/^\d\d:\d\d:\d\d {2}GET {5}\/loadtest\/ping {2}200 {2}\d+\.\d ms$/);
    expect(agent.terminal.sgrSeen).toBeGreaterThan(0);

    agent.signal('INT');
    expect(await agent.exited).toBe(0);
    const end = agent.terminal.lines();
    expect(end.some((line) => line.includes('offline'))).toBe(true);
    expect(end.filter((line) => line !== '').at(-1)).toBe('tunnel2: closed');
    // The scroll region is reset and the cursor shown again, whatever came before.
    const raw = agent.raw();
    expect(raw.lastIndexOf('\x1b[r')).toBeGreaterThan(raw.lastIndexOf('\x1b[5;'));
    expect(raw.lastIndexOf('\x1b[?25h')).toBeGreaterThan(raw.lastIndexOf('\x1b[?25l'));
  });

  it('NO_COLOR and --no-color: cursor movement but no colour', async () => {
    const { backend, port, url } = await stack();
    for (const [name, extra, env] of [
      ['nocolorenv', [], { NO_COLOR: '1' }],
      ['nocolorflag', ['--no-color'], {}],
    ] as const) {
      const agent = agentInPty(backend.port, url, name, extra, { env });
      cleanups.push(() => agent.kill());
      await agent.waitForScreen(has(`http://${name}.localhost:${port}/`), 'the URL');
      expect((await ping(port, name)).status).toBe(200);
      await agent.waitForScreen(has('/loadtest/ping  200'), 'the request line');
      agent.signal('INT');
      expect(await agent.exited).toBe(0);
      expect(agent.raw()).not.toMatch(SGR);
      expect(agent.raw()).toContain('\x1b[1;1H');
    }
  });

  // Issue #29, 8, on a terminal: Node writes to a terminal synchronously, so one that stopped reading (a
  // frozen emulator, Ctrl-S) stopped the agent's event loop, and every request through the tunnel with it.
  it('a terminal that stops reading: the tunnel keeps serving, and the lines dropped meanwhile are counted', async () => {
    const { backend, port, url } = await stack();
    const agent = agentInPty(backend.port, url, 'ttystall', ['--no-inspect']);
    cleanups.push(() => agent.kill());
    await agent.waitForScreen(has('ttystall.localhost'), 'the header');
    agent.pause();
    const client = new Agent({ keepAlive: true, maxSockets: 8 });
    cleanups.push(() => client.destroy());
    let next = 0;
    const statuses: number[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next++ < 3000) {
          const res = await send({
            port,
            path: '/loadtest/ping',
            headers: ['Host', `ttystall.localhost:${port}`],
            agent: client,
            keepBody: false,
          });
          statuses.push(res.status);
        }
      }),
    );
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(statuses).toHaveLength(3000);
    agent.resume();
    await agent.waitForScreen(has('lines dropped while stdout was not read'), 'the count of lines dropped');
    await agent.waitForScreen((l) => (l[0] ?? '').includes('requests 3000 '), 'all 3000 requests counted');
    agent.signal('INT');
    expect(await agent.exited).toBe(0);
  });

  it('--no-tty on a terminal writes exactly what a pipe gets: the plain line log', async () => {
    const { backend, port, url } = await stack();
    const args = (name: string) => ['http', String(backend.port), '--server', url, '--subdomain', name];
    const tty = ptyCli([...args('plainlog1'), '--no-tty']);
    cleanups.push(() => tty.kill());
    await tty.waitForScreen(has('inspector'), 'the plain header');
    expect((await ping(port, 'plainlog1')).status).toBe(200);
    await tty.waitForScreen(has('/loadtest/ping  200'), 'the request line');
    tty.signal('INT');
    expect(await tty.exited).toBe(0);

    const piped = spawnCli(args('plainlog2'));
    cleanups.push(() => piped.kill('SIGKILL'));
    await piped.waitFor('text');
    // The header's lines (forwarding, also at, inspector, a blank one) before any request.
    await until(() => piped.events.length >= 4, { what: 'the plain header', timeoutMs: 20_000 });
    expect((await ping(port, 'plainlog2')).status).toBe(200);
    await until(() => piped.events.some((e) => String(e.line).includes('/loadtest/ping')), {
      what: 'the request line',
      timeoutMs: 20_000,
    });
    piped.kill('SIGINT');
    expect(await piped.exited).toBe(0);

    // The pty turns \n into \r\n; times, durations and the inspector's port differ between the runs.
    const mask = (text: string) =>
      text
        .replace(/\d\d:\d\d:\d\d {2}/g, 'TT:TT:TT  ')
        .replace(/\d+\.\d ms/g, 'N ms')
        .replace(/127\.0\.0\.1:\d+/g, '127.0.0.1:P')
        .replace(/plainlog\d/g, 'plainlog');
    const ttyText = mask(tty.raw().replaceAll('\r\n', '\n'));
    const pipeText = mask(`${piped.events.map((e) => String(e.line)).join('\n')}\n`);
    expect(ttyText).not.toContain('\x1b');
    // stderr shares the pty: the closing line follows the stdout lines there, after the newline that ends
    // the line a terminal echoes ^C on (src/terminal/ctrl-c-echo.ts; a pipe gets none).
    expect(ttyText).toBe(`${pipeText}\ntunnel2: closed\n`);
    expect(pipeText).toMatch(
      /^tunnel2: forwarding http:\/\/plainlog\.localhost:\d+\/ -> http:\/\/localhost:\d+\n/,
    );
  });

  it('redraws for a narrower window, cutting header lines instead of wrapping them', async () => {
    const { backend, url } = await stack();
    const agent = agentInPty(backend.port, url, 'resizeme', ['--no-inspect'], { columns: 100, rows: 20 });
    cleanups.push(() => agent.kill());
    await agent.waitForScreen(has('resizeme'), 'the URL');
    agent.resize(30, 12);
    const narrow = await agent.waitForScreen(
      (l) => l[0]?.startsWith('tunnel2') === true,
      'the redrawn header',
    );
    for (const line of narrow.slice(0, 4)) expect([...line].length).toBeLessThanOrEqual(30);
    expect(narrow[1]).toMatch(/^ {2}http:\/\/resizeme\..*…$/);
    expect(narrow[3]).toBe('─'.repeat(30));
    agent.signal('INT');
    expect(await agent.exited).toBe(0);
  });

  it('shows reconnecting (attempt n) while the edge is away, then online again', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const { edge: first, url, port } = await startEdgeProcess();
    cleanups.push(() => first.kill('SIGKILL'));
    const agent = agentInPty(backend.port, url, 'comeback', ['--no-inspect']);
    cleanups.push(() => agent.kill());
    await agent.waitForScreen((l) => (l[0] ?? '').includes('online'), 'online');
    first.kill('SIGKILL');
    await first.exited;
    await agent.waitForScreen((l) => /reconnecting \(attempt \d+\)/.test(l[0] ?? ''), 'reconnecting');
    const { edge: second } = await startEdgeProcess(port);
    cleanups.push(() => second.kill('SIGKILL'));
    const back = await agent.waitForScreen(
      has(`reconnected: http://comeback.localhost:${port}/`),
      'reconnected',
    );
    await agent.waitForScreen((l) => (l[0] ?? '').includes('online'), 'online again');
    expect(back.some((line) => line.startsWith('tunnel2: connection lost'))).toBe(true);
    agent.signal('INT');
    expect(await agent.exited).toBe(0);
  });

  it('tunnel2 start: one header row per tunnel, lines prefixed by its name, requests and connections apart', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const hash = await startHashServer();
    cleanups.push(hash.close);
    const edge = buildEdge({ port: 0, logger: silent, tcpPorts: portRange() });
    const { port, url } = await edge.listen();
    cleanups.push(() => edge.close(0));
    const dir = await mkdtemp(join(tmpdir(), 'tunnel2-tty-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const config = join(dir, 'tunnel2.yml');
    await writeFile(
      config,
      [
        `server: ${url}`,
        'tunnels:',
        `  web: { target: ${backend.port}, subdomain: ttyweb }`,
        `  api: { target: ${backend.port}, subdomain: ttyapi }`,
        `  db: { proto: tcp, target: ${hash.port} }`,
      ].join('\n'),
    );
    const agent = ptyCli(['start', '--all', '--config', config]);
    cleanups.push(() => agent.kill());
    const first = await agent.waitForScreen(has('  db   tcp://'), 'the three rows');
    expect(first[0]).toMatch(/requests 0 \(0\/min\) {3}connections 0 \(0\/min\) {3}open 0$/);
    expect(first[1]).toBe(`  web  http://ttyweb.localhost:${port}/ -> http://localhost:${backend.port}`);
    expect(first.some((line) => line.startsWith(`  api  http://ttyapi.localhost:${port}/ -> `))).toBe(true);
    const db = first.find((line) => line.startsWith('  db   tcp://')) ?? '';
    const tcpPort = Number(/:(\d+) ->/.exec(db)?.[1]);

    expect((await ping(port, 'ttyweb')).status).toBe(200);
    expect((await ping(port, 'ttyweb')).status).toBe(200);
    expect((await ping(port, 'ttyapi')).status).toBe(200);
    const { sent, answer } = await sendAndHash(tcpPort, 1000);
    expect(answer).toBe(sent);
    const after = await agent.waitForScreen(
      (l) => (l[0] ?? '').includes('requests 3 (3/min)   connections 1 (1/min)'),
      'the counts',
    );
    const log = after.filter((line) => /^\w+ {2}\d\d:\d\d:\d\d/.test(line));
    expect(
      log.filter((line) => line.startsWith('web  ') && line.includes('/loadtest/ping  200')),
    ).toHaveLength(2);
    expect(
      log.filter((line) => line.startsWith('api  ') && line.includes('/loadtest/ping  200')),
    ).toHaveLength(1);
    expect(log.filter((line) => line.startsWith('db  ') && line.includes(' in 1000 B'))).toHaveLength(1);
    expect(agent.terminal.sgrSeen).toBeGreaterThan(0);
    agent.signal('INT');
    expect(await agent.exited).toBe(0);
    expect(
      agent.terminal
        .lines()
        .filter((line) => line !== '')
        .at(-1),
    ).toBe('tunnel2: closed');

    // --no-tty: the plain log, each line prefixed by its tunnel's name; --no-color: the header, no colour.
    // (New names: the ones above stay reserved a while for the agent that just left.)
    await writeFile(
      config,
      [
        `server: ${url}`,
        'tunnels:',
        `  web: { target: ${backend.port}, subdomain: ttyplain }`,
        `  api: { target: ${backend.port}, subdomain: ttygrey }`,
      ].join('\n'),
    );
    const plain = ptyCli(['start', 'web', '--config', config, '--no-tty']);
    cleanups.push(() => plain.kill());
    await plain.waitForScreen(
      has(`web  tunnel2: forwarding http://ttyplain.localhost:${port}/`),
      'the plain log',
    );
    expect((await ping(port, 'ttyplain')).status).toBe(200);
    await plain.waitForScreen(
      (l) => l.some((line) => /^web {2}\d\d:\d\d:\d\d {2}GET {5}\/loadtest\/ping {2}200/.test(line)),
      'the request line',
    );
    plain.signal('INT');
    expect(await plain.exited).toBe(0);
    expect(plain.raw()).not.toContain('\x1b');
    const grey = ptyCli(['start', 'api', '--config', config, '--no-color']);
    cleanups.push(() => grey.kill());
    await grey.waitForScreen(has(`  api  http://ttygrey.localhost:${port}/`), 'the header row');
    grey.signal('INT');
    expect(await grey.exited).toBe(0);
    expect(grey.raw()).not.toMatch(SGR);
    expect(grey.raw()).toContain('\x1b[1;1H');
  });
});
