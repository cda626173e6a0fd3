import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type RequestListener } from 'node:http';
import { type AddressInfo, createServer as createNetServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { freePort } from '@tunnel2/test-services';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AgentErrorCode, connect } from '../src/index.js';
import { cli, spawnCli } from './support/processes.js';
import { ptyCli } from './support/pty-cli.js';
import { silent, until } from './support/stack.js';

let edge: Edge;
let url: string;
const cleanups: (() => unknown)[] = [];
beforeAll(async () => {
  edge = buildEdge({ port: 0, logger: silent });
  ({ url } = await edge.listen());
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
afterAll(() => edge.close(0));

/** A web server that is not an edge, answering every request with `handler`: its URL, to give as --server. */
async function webServer(handler: RequestListener): Promise<string> {
  const web = createServer(handler);
  web.listen(0, '127.0.0.1');
  await once(web, 'listening');
  cleanups.push(() => {
    web.closeAllConnections();
    web.close();
  });
  return `http://127.0.0.1:${(web.address() as AddressInfo).port}`;
}

describe('no edge at the address', () => {
  it('--json: after the first failure one hint event, then only the usual reconnect events', async () => {
    const server = `http://127.0.0.1:${await freePort()}`;
    const agent = spawnCli(['http', '3000', '--json', '--no-inspect'], { TUNNEL2_SERVER: server });
    cleanups.push(() => agent.kill('SIGKILL'));
    await until(() => agent.events.filter((e) => e.event === 'reconnecting').length >= 3);
    agent.kill('SIGINT');
    await agent.exited;
    const names = agent.events.map((e) => e.event);
    expect(names.slice(0, 4)).toEqual(['error', 'hint', 'reconnecting', 'error']);
    expect(names.filter((n) => n === 'hint')).toHaveLength(1);
    expect(agent.events[1]).toMatchObject({
      code: 'TUNNEL2_HINT_NO_EDGE',
      message: expect.stringContaining(`no tunnel2 edge answers at ${server}`),
    });
    // Existing events keep their shape.
    expect(Object.keys(agent.events[0]!).sort()).toEqual(['code', 'event', 'fatal', 'message', 'time']);
  });

  it('human output: one line naming tunnel2 server, --server and TUNNEL2_SERVER, once', async () => {
    const server = `http://127.0.0.1:${await freePort()}`;
    const agent = spawnCli(['http', '3000', '--server', server, '--no-inspect']);
    cleanups.push(() => agent.kill('SIGKILL'));
    await until(() => agent.stderr().split('retrying in').length > 3);
    agent.kill('SIGINT');
    await agent.exited;
    const lines = agent.stderr().split('\n');
    expect(lines[0]).toBe(
      `tunnel2: no tunnel2 edge answers at ${server}. Run one on this machine with "tunnel2 server" (in another terminal), or point at yours with --server <url> or TUNNEL2_SERVER=<url>`,
    );
    expect(lines.filter((l) => l.includes('no tunnel2 edge answers'))).toHaveLength(1);
    // One line per attempt, each saying why and when the next comes.
    const attempts = lines.slice(1).filter((l) => l.startsWith('tunnel2: cannot reach'));
    expect(attempts.length).toBeGreaterThanOrEqual(3);
    for (const [i, line] of attempts.entries()) {
      expect(line).toMatch(
        new RegExp(
          `^tunnel2: cannot reach the edge at ${server}: ECONNREFUSED; retrying in \\d+\\.\\d s \\(attempt ${i + 1}\\)$`,
        ),
      );
    }
    expect(lines.slice(1, 1 + attempts.length)).toEqual(attempts);
  });

  it('in a terminal (a real pty): the same one line per attempt under the header, which counts the attempts', async () => {
    const server = `http://127.0.0.1:${await freePort()}`;
    const tty = ptyCli(['http', '3000', '--server', server, '--no-inspect'], { columns: 200 });
    cleanups.push(() => tty.kill());
    const screen = await tty.waitForScreen(
      (lines) => lines.some((l) => l.includes('(attempt 2)')),
      'the second attempt line',
    );
    tty.signal('INT');
    await tty.exited;
    const attempts = screen.filter((l) => l.startsWith('tunnel2: cannot reach the edge'));
    expect(attempts.map((l) => /\(attempt (\d+)\)$/.exec(l)?.[1])).toEqual(
      attempts.map((_, i) => String(i + 1)),
    );
    expect(screen.some((l) => l.includes('reconnecting (attempt'))).toBe(true);
    expect(screen.filter((l) => l.includes('no tunnel2 edge answers'))).toHaveLength(1);
  });

  it('a host that does not resolve says "no such host", one line per attempt, and no advice to run an edge on this machine', async () => {
    // .invalid never resolves (RFC 6761).
    const server = 'http://no-such-host.invalid:8080';
    const agent = spawnCli(['http', '3000', '--server', server, '--no-inspect']);
    cleanups.push(() => agent.kill('SIGKILL'));
    await until(() => agent.stderr().split('retrying in').length > 2);
    agent.kill('SIGINT');
    await agent.exited;
    const lines = agent.stderr().split('\n');
    expect(lines[0]).toBe(
      `tunnel2: no tunnel2 edge answers at ${server}. Check the address, or point at your edge with --server <url> or TUNNEL2_SERVER=<url>`,
    );
    expect(lines[1]).toMatch(
      /^tunnel2: no such host: no-such-host\.invalid \(the edge at http:\/\/no-such-host\.invalid:8080\); retrying in \d+\.\d s \(attempt 1\)$/,
    );
    expect(lines[2]).toMatch(/^tunnel2: no such host: no-such-host\.invalid .*\(attempt 2\)$/);
    expect(agent.stderr()).not.toContain('on this machine');
  });

  it('a web server that is not an edge: one line "is not a tunnel2 edge (HTTP 404)", none of its page, exit 1', async () => {
    const server = await webServer((_req, res) => {
      res.writeHead(404, { 'content-type': 'text/html' });
      res.end('<!DOCTYPE html><html><body><h1>Not Found</h1></body></html>');
    });
    const { code, stderr } = await cli(['http', '3000', '--server', server, '--no-inspect']);
    expect(code).toBe(1);
    expect(stderr).toBe(
      `tunnel2: ${server} is not a tunnel2 edge (HTTP 404): check --server <url> or TUNNEL2_SERVER\ntunnel2: closed\n`,
    );
  });

  it("a hostile edge's words reach the terminal without its control characters (no escape sequences, no fake lines)", async () => {
    // What an edge writes is as hostile as every other input: an escape sequence in a refusal would reach the
    // user's terminal (OSC 52 writes the clipboard, CSI 2J clears the screen), a newline would forge a line.
    const ESC = String.fromCharCode(27);
    const BEL = String.fromCharCode(7);
    const CSI8 = String.fromCharCode(0x9b);
    const evil = `subdomain "x" is ${ESC}]52;c;ZXZpbA==${BEL}taken${ESC}[2J${CSI8}31m\ntunnel2: ready at http://evil.example/`;
    const server = await webServer((_req, res) => {
      res.writeHead(409, {
        'content-type': 'text/plain; charset=utf-8',
        'x-tunnel2-error': 'TUNNEL2_ERR_NAME_IN_USE',
        'x-tunnel2-name-holder': 'other',
      });
      res.end(evil);
    });
    const { code, stderr } = await cli(['http', '3000', '--server', server, '-n', 'x', '--no-inspect']);
    expect(code).toBe(1);
    expect(stderr).toContain('edge refused the tunnel (409): subdomain "x" is ');
    expect([...stderr].filter((c) => c !== '\n' && (c < ' ' || (c >= '\x7f' && c <= '\x9f')))).toEqual([]);
    expect(stderr.split('\n').filter((line) => line.startsWith('tunnel2: ready'))).toEqual([]);
  });

  it('Ctrl-C while the connect to the edge hangs (no answer to the upgrade): stops at once, no error, exit 0', async () => {
    // An address that takes the connection and never answers (a stuck proxy, an edge frozen): the connect
    // waited out its 10 s handshake timeout before Ctrl-C, and a second or third one, could end the command,
    // which then reported the timeout as an error and suggested running an edge.
    const held: Socket[] = [];
    const mute = createNetServer((socket) => {
      held.push(socket);
      // Read (and drop) what comes, so that the agent hanging up is seen.
      socket.resume();
      socket.on('error', () => {});
    });
    mute.listen(0, '127.0.0.1');
    await once(mute, 'listening');
    cleanups.push(() => {
      for (const socket of held) socket.destroy();
      mute.close();
    });
    const server = `http://127.0.0.1:${(mute.address() as AddressInfo).port}`;
    const agent = spawnCli(['http', '3000', '--json', '--no-inspect', '--server', server]);
    cleanups.push(() => agent.kill('SIGKILL'));
    await until(() => held.length > 0);
    const hungUp = once(held[0]!, 'close');
    agent.kill('SIGINT');
    expect(await agent.exited).toBe(0);
    // The agent hung up itself (the edge side never answered, and never will).
    await hungUp;
    expect(agent.events.map((e) => e.event)).toEqual(['closed']);
  });

  it('a server that redirects (http:// to https://, as a proxy in front of an edge does) names where to, exit 1', async () => {
    const server = await webServer((_req, res) => {
      res.writeHead(301, {
        location: 'https://tunnel.example.com/_tunnel2/connect',
        'content-type': 'text/html',
      });
      res.end('<html><body>Moved</body></html>');
    });
    const { code, stderr } = await cli(['http', '3000', '--server', server, '--no-inspect']);
    expect(code).toBe(1);
    expect(stderr).toBe(
      `tunnel2: ${server} redirects to https://tunnel.example.com/_tunnel2/connect (HTTP 301): if the edge is there, use --server https://tunnel.example.com\ntunnel2: closed\n`,
    );
  });

  it('a server that answers with a body that never ends is still named (its body is not read past a few KiB)', async () => {
    const server = await webServer((_req, res) => {
      res.writeHead(404, { 'content-type': 'text/html' });
      const chunk = Buffer.alloc(16 * 1024, 'x');
      const more = (): void => {
        while (res.write(chunk)) {}
        res.once('drain', more);
      };
      more();
    });
    const { code, stderr } = await cli(['http', '3000', '--server', server, '--no-inspect']);
    expect(code).toBe(1);
    expect(stderr).toContain(`tunnel2: ${server} is not a tunnel2 edge (HTTP 404)`);
  });

  it('no hint when the edge answered: a later outage is only reconnect lines', async () => {
    const own = buildEdge({ port: 0, logger: silent });
    const { url: ownUrl } = await own.listen();
    const agent = spawnCli(['http', '3000', '--server', ownUrl, '--json', '--no-inspect']);
    cleanups.push(() => agent.kill('SIGKILL'));
    await agent.waitFor('ready');
    await own.close(0);
    await until(() => agent.events.filter((e) => e.event === 'reconnecting').length >= 2);
    expect(agent.events.some((e) => e.event === 'hint')).toBe(false);
  });
});

describe('the edge address', () => {
  it('start: the no-edge hint names the server the file gave', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tunnel2-hint-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const server = `http://127.0.0.1:${await freePort()}`;
    const config = join(dir, 'tunnel2.yml');
    await writeFile(config, `server: ${server}\ntunnels:\n  web: { target: 3000 }\n`);
    const agent = spawnCli(['start', '--all', '--config', config, '--json']);
    cleanups.push(() => agent.kill('SIGKILL'));
    const hint = await agent.waitFor('hint');
    expect(hint.message).toContain(`no tunnel2 edge answers at ${server}.`);
  });

  const notUrl =
    'tunnel2: --server "localhost:8080": expected an http(s):// URL, e.g. http://localhost:8080\n';
  for (const args of [
    ['http', '3000', '--no-inspect'],
    ['tcp', '5432'],
  ]) {
    it(`${args[0]} --server without a scheme: one line, exit 2, no retries`, async () => {
      const { code, stderr } = await cli([...args, '--server', 'localhost:8080']);
      expect(stderr).toBe(notUrl);
      expect(code).toBe(2);
    });
  }

  it('TUNNEL2_SERVER without a scheme is named as such (http and start)', async () => {
    const env = { TUNNEL2_SERVER: 'localhost:8080' };
    const expected =
      'tunnel2: TUNNEL2_SERVER "localhost:8080": expected an http(s):// URL, e.g. http://localhost:8080\n';
    const http = await cli(['http', '3000', '--no-inspect'], env);
    expect([http.code, http.stderr]).toEqual([2, expected]);
    const dir = await mkdtemp(join(tmpdir(), 'tunnel2-server-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const config = join(dir, 'tunnel2.yml');
    await writeFile(config, 'tunnels:\n  web: { target: 3000 }\n');
    const start = await cli(['start', '--all', '--config', config], env);
    expect([start.code, start.stderr]).toEqual([2, expected]);
    const flag = await cli(['start', '--all', '--config', config, '--server', 'localhost:8080']);
    expect([flag.code, flag.stderr]).toEqual([2, notUrl]);
  });

  it('accepts ws:// and wss:// as the edge address, as connecting does', async () => {
    const tunnel = await connect({ target: 1, server: url.replace(/^http/, 'ws'), inspect: false });
    cleanups.push(() => tunnel.close(0));
    expect(tunnel.server).toBe(url.replace(/^http/, 'ws'));
  });
});

describe('a name taken by another agent', () => {
  it('names the name and what to do (another --subdomain, or the token that holds it)', async () => {
    const holder = await connect({ target: 1, server: url, subdomain: 'taken' });
    cleanups.push(() => holder.close(0));
    const expected =
      'edge refused the tunnel (409): subdomain "taken" is taken by another agent. Choose another --subdomain, or run with the token that holds it (--token or TUNNEL2_TOKEN)';
    await expect(connect({ target: 1, server: url, subdomain: 'taken' })).rejects.toMatchObject({
      edgeCode: 'TUNNEL2_ERR_NAME_IN_USE',
      fatal: true,
      message: expected,
    });
    const { code, stderr } = await cli([
      'http',
      '1',
      '--server',
      url,
      '--subdomain',
      'taken',
      '--no-inspect',
    ]);
    expect(code).toBe(1);
    expect(stderr).toBe(`tunnel2: ${expected}\ntunnel2: closed\n`);
  });
});

describe('an edge speaking another protocol version', () => {
  it('an agent newer than the edge: both versions named, the edge to upgrade, no session', async () => {
    const error = await connect({
      target: 1,
      server: url,
      protocolVersions: { minVersion: 2, maxVersion: 3 },
    }).catch((err: unknown) => err);
    expect(error).toMatchObject({
      code: AgentErrorCode.VERSION_MISMATCH,
      fatal: true,
      message: expect.stringMatching(
        /^this agent \(tunnel2 \S+\) speaks tunnel protocol v2\.\.v3, the edge v1: the edge is older: upgrade the edge/,
      ),
    });
    expect(edge.sessions.size).toBe(0);
  });

  it('an agent older than the edge: both versions named, the agent to upgrade', async () => {
    await expect(
      connect({ target: 1, server: url, protocolVersions: { minVersion: 0, maxVersion: 0 } }),
    ).rejects.toMatchObject({
      code: AgentErrorCode.VERSION_MISMATCH,
      message: expect.stringContaining(
        'speaks tunnel protocol v0, the edge v1: this agent is older: upgrade it',
      ),
    });
  });
});
