import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterEach, describe, expect, it } from 'vitest';
import { send } from './support/http-client.js';
import { cliBin, spawnCli } from './support/processes.js';
import { ptyCli } from './support/pty-cli.js';

const ptyRun = fileURLToPath(new URL('./support/pty-run.py', import.meta.url));
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const ESC = String.fromCharCode(27);
const SGR = new RegExp(`${ESC}\\[[0-9;]*m`, 'g');
const has = (text: string) => (lines: string[]) => lines.some((line) => line.includes(text));
/** A human log line: local time, level, message (the fields follow). */
const humanLine = (level: string, message: string) =>
  new RegExp(`^\\d\\d:\\d\\d:\\d\\d\\.\\d{3} ${level.padEnd(5)} ${message}`);

/** `tunnel2 server` under a pty, and the addresses its banner gives once it listens. */
async function serverInPty(args: string[], env?: NodeJS.ProcessEnv) {
  const server = ptyCli(['server', '--port', '0', ...args], { columns: 160, rows: 30, env });
  cleanups.push(() => server.kill());
  const screen = await server.waitForScreen(has('agents:  tunnel2 http'), 'the banner');
  const agents = screen.find((line) => line.startsWith('agents:'))!;
  const serverUrl = /--server (\S+)/.exec(agents)![1]!;
  const listening = screen.find((line) => line.startsWith('tunnel2 edge listening on'))!;
  const port = Number(new URL(listening.split(' ').at(-1)!).port);
  return { server, serverUrl, port };
}

describe('the edge log in a terminal (`tunnel2 server` under a real pty)', () => {
  it('prints coloured human lines, agents and requests included, one per event', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const { server, serverUrl, port } = await serverInPty(['--log-level', 'debug']);
    await server.waitForScreen(
      (l) => l.some((line) => humanLine('INFO', 'edge listening').test(line)),
      'listening',
    );
    // Coloured: the level and the time are painted; no JSON anywhere.
    expect(server.raw()).toMatch(new RegExp(`${ESC}\\[32mINFO`));
    expect(server.raw()).not.toContain('{"level"');

    // An agent connects through the address the banner gives; the edge's lines about it are human too.
    const agent = spawnCli([
      'http',
      String(backend.port),
      '--server',
      serverUrl,
      '--subdomain',
      'logs',
      '--json',
    ]);
    cleanups.push(() => agent.kill('SIGKILL'));
    await agent.waitFor('ready');
    const connected = await server.waitForScreen(has('agent connected'), 'agent connected');
    expect(connected.find((line) => line.includes('agent connected'))).toMatch(
      /^\d\d:\d\d:\d\d\.\d{3} INFO {2}agent connected +session=logs /,
    );
    const requestId = 'edge-log-test-1';
    const answer = await send({
      port,
      path: '/loadtest/ping',
      headers: ['Host', `logs.localhost:${port}`, 'X-Request-Id', requestId],
    });
    expect(answer.status).toBe(200);
    const withRequest = await server.waitForScreen(has(`requestId=${requestId}`), 'the request line');
    const requestLine = withRequest.find((line) => line.includes(`requestId=${requestId}`))!;
    expect(requestLine).toMatch(
      /^\d\d:\d\d:\d\d\.\d{3} DEBUG request +requestId=\S+ session=logs method=GET url=\/loadtest\/ping status=200 durationMs=[\d.]+/,
    );
    // Aligned: the fields of every event line start in one column.
    const column = (line: string) => line.search(/ \S+=/);
    expect(column(requestLine)).toBe(column(connected.find((line) => line.includes('agent connected'))!));

    server.signal('INT');
    expect(await server.exited).toBe(0);
    const end = server.raw().replace(SGR, '');
    expect(end).toMatch(/INFO {2}shutdown signal received +signal=SIGINT/);
    expect(end).toMatch(/INFO {2}stopped/);
  });

  it('prints JSON on a terminal when asked (--log-format json), and no colour under NO_COLOR', async () => {
    const { server } = await serverInPty(['--log-format', 'json']);
    await server.waitForScreen(has('agents:'), 'the banner');
    server.signal('INT');
    expect(await server.exited).toBe(0);
    // A long JSON line wraps on the screen: read what was written, line by line.
    const logLines = server
      .raw()
      .split('\r\n')
      .filter((line) => line.startsWith('{'));
    expect(logLines.map((line) => (JSON.parse(line) as { msg: string }).msg)).toEqual(
      expect.arrayContaining(['edge listening', 'shutdown signal received', 'stopped']),
    );

    const plain = await serverInPty([], { NO_COLOR: '1' });
    await plain.server.waitForScreen(has('edge listening'), 'listening');
    expect(plain.server.raw()).not.toMatch(SGR);
    plain.server.signal('INT');
    expect(await plain.server.exited).toBe(0);
  });
});

describe('the edge log read by a program', () => {
  it('is JSON, one object per line, when stdout and stderr are pipes; a signal right at "listening" drains', async () => {
    // The signal is sent the moment the listening line is read: the edge printed it before listening for
    // signals, and about one start in five was killed outright (exit by SIGTERM, no drain, no last lines).
    for (let i = 0; i < 6; i++) {
      const server = spawnCli(['server', '--port', '0', '--json']);
      cleanups.push(() => server.kill('SIGKILL'));
      await server.waitFor('listening');
      server.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      const lines = server.stderr().trim().split('\n');
      for (const line of lines) expect(JSON.parse(line)).toHaveProperty('level');
      expect(lines.map((line) => (JSON.parse(line) as { msg: string }).msg)).toEqual(
        expect.arrayContaining(['edge listening', 'shutdown signal received', 'stopped']),
      );
    }
  });
});

describe('the edge log with stdout redirected and stderr on a terminal', () => {
  it('is JSON: the output is going to a program or a file (`tunnel2 server > out.txt`)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tunnel2-edge-log-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const out = join(dir, 'stdout.txt');
    // The shell only redirects stdout and becomes the edge (exec): signals reach it, stderr stays the pty.
    const child = spawn(
      'python3',
      [
        ptyRun,
        '160',
        '30',
        'sh',
        '-c',
        'exec "$0" "$1" server --port 0 > "$2"',
        process.execPath,
        cliBin,
        out,
      ],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    cleanups.push(() => {
      if (child.exitCode === null && child.stdin.writable) child.stdin.end('signal KILL\n');
    });
    let terminal = '';
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        terminal += chunk.toString();
        if (terminal.includes('"msg":"edge listening"')) resolve();
      });
      void exited.then(() => reject(new Error(`exited before listening: ${terminal}`)));
    });
    child.stdin.write('signal INT\n');
    expect(await exited).toBe(0);
    const logLines = terminal.split('\r\n').filter((line) => line !== '');
    for (const line of logLines) expect(JSON.parse(line)).toHaveProperty('level');
    expect(terminal).not.toMatch(SGR);
    expect(await readFile(out, 'utf8')).toMatch(
      /^tunnel2 edge listening on http:\/\/127\.0\.0\.1:\d+\nagents: /,
    );
  });
});

describe('the banner and the landing page', () => {
  it('suggest the same server address: the public one, not the listening 0.0.0.0', async () => {
    for (const args of [[], ['--host', '0.0.0.0', '--token', 'banner-token-123']]) {
      const { server, serverUrl, port } = await serverInPty(args);
      const banner = server.terminal.lines();
      const landing = await send({ port, path: '/', headers: ['Host', `localhost:${port}`] });
      const page = landing.body.toString();
      expect(page).toContain(`Agents connect with:  tunnel2 http <port> --server ${serverUrl}\n`);
      // Listening on every interface is no address to give: the page's is.
      expect(serverUrl).toBe(`http://localhost:${port}`);
      const tunnels = banner.find((line) => line.startsWith('tunnels:'))!;
      const [byHost, byPath] = tunnels.replace('tunnels: ', '').split('  and  ');
      expect(page).toContain(`Tunnels answer at:    ${byHost}  or  ${byPath}\n`);
      server.signal('INT');
      expect(await server.exited).toBe(0);
    }
  });
});

describe('tunnel2 server --help and usage errors, as a user runs them', () => {
  it('help fits the terminal it is shown on, grouped, defaults in human units', async () => {
    const help = ptyCli(['server', '--help'], { columns: 72, rows: 40 });
    cleanups.push(() => help.kill());
    expect(await help.exited).toBe(0);
    const lines = help.raw().split('\r\n');
    expect(Math.max(...lines.map((line) => line.length))).toBeLessThanOrEqual(72);
    for (const heading of ['Listening:', 'Domains and TLS:', 'Agents and tokens:', 'Limits:', 'TCP tunnels:'])
      expect(lines).toContain(heading);
    expect(help.raw()).toContain('default 60 s;');
    // Piped (not a terminal): COLUMNS, else 80.
    const piped = spawnCli(['server', '--help'], { COLUMNS: '64' });
    expect(await piped.exited).toBe(0);
    const text = piped.events.map((event) => String(event.line ?? '')).join('\n');
    expect(text).toContain('Protocol tuning:');
    expect(Math.max(...text.split('\n').map((line) => line.length))).toBeLessThanOrEqual(64);
  });

  it('an unknown flag or a flag without its value exits 2 with one line and where the help is', async () => {
    for (const [args, problem] of [
      [['--prot', '8080'], 'unknown option --prot (did you mean --port?)'],
      [['--port'], 'option --port needs a value'],
    ] as const) {
      const server = spawnCli(['server', ...args]);
      expect(await server.exited).toBe(2);
      expect(server.stderr()).toBe(
        `tunnel2 server: ${problem}\nusage: tunnel2 server [options]\nsee tunnel2 server --help\n`,
      );
    }
  });
});
