import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createSecureServer } from 'node:http2';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeRequestHead, type Hello, type MuxSession } from '@tunnel2/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { connect } from '../src/index.js';
import { EDGE_NO_HTTP2_HINT } from '../src/session/tunnel.js';
import { startH2Backend } from './support/h2-backend.js';
import { makeCertificates } from './support/https-backend.js';
import { startPlayedEdge } from './support/played-edge.js';
import { cli, type Spawned, spawnCli } from './support/processes.js';

// PROTOCOL.md "HTTP/2 and gRPC", capabilities: the agent says `http2` in its HELLO; an HTTP/2 backend behind
// an edge whose ACK does not (it predates HTTP/2) gets one line saying to upgrade the edge. And the flag
// combinations that cannot work are usage errors.

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/**
 * An edge played from the protocol package, answering every HELLO with `ack` (plus a session name, and one
 * for each tunnel the HELLO lists, as `tunnel2 start` asks).
 */
async function playedEdge(ack: Record<string, unknown>): Promise<{ url: string; hellos: Hello[] }> {
  const hellos: Hello[] = [];
  const played = await startPlayedEdge((hello, session) => {
    hellos.push(hello);
    const listed = Array.isArray(hello.meta.tunnels) ? hello.meta.tunnels : [];
    const info = (name: string) => ({ name, url: `http://${name}.example/`, urls: [] });
    session.sendHello(
      {
        name: 'played',
        url: 'http://played.example/',
        ...(listed.length > 0 ? { tunnels: listed.map((_, i) => info(`listed${i}`)) } : {}),
        ...ack,
      },
      true,
    );
  });
  cleanups.push(() => played.close());
  return { url: played.url, hellos };
}

describe('capabilities in HELLO', () => {
  it('the agent says http2 in its HELLO metadata', async () => {
    const edge = await playedEdge({});
    const backend = await startH2Backend();
    cleanups.push(() => backend.close());
    const tunnel = await connect({ target: backend.port, server: edge.url });
    cleanups.push(() => tunnel.close(0));
    expect(edge.hellos[0]?.meta).toMatchObject({ http2: true });
  });

  it('an h2c backend behind an edge without http2: one hint naming the edge and saying to upgrade it', async () => {
    const edge = await playedEdge({});
    const backend = await startH2Backend();
    cleanups.push(() => backend.close());
    const agent: Spawned = spawnCli(['http', String(backend.port), '--h2c', '--server', edge.url, '--json']);
    cleanups.push(() => agent.kill('SIGKILL'));
    const ready = await agent.waitFor('ready');
    expect(ready.backendProtocol).toBe('h2c');
    const hint = await agent.waitFor('hint');
    expect(hint.code).toBe(EDGE_NO_HTTP2_HINT);
    expect(hint.message).toContain(edge.url);
    expect(hint.message).toMatch(/does not serve HTTP\/2.*upgrade the edge/);
  });

  it('no hint when the edge says http2, nor for an HTTP/1.1 backend', async () => {
    const backend = await startH2Backend();
    cleanups.push(() => backend.close());
    for (const [ack, h2c] of [
      [{ http2: true }, true],
      [{}, false],
    ] as const) {
      const edge = await playedEdge(ack);
      const agent: Spawned = spawnCli([
        'http',
        String(backend.port),
        ...(h2c ? ['--h2c'] : []),
        '--server',
        edge.url,
        '--json',
      ]);
      cleanups.push(() => agent.kill('SIGKILL'));
      const ready = await agent.waitFor('ready');
      expect(ready.backendProtocol).toBe(h2c ? 'h2c' : 'http/1.1');
      agent.kill('SIGINT');
      await agent.exited;
      // The hint would have come right after ready, before the SIGINT's closing line.
      expect(agent.events.map((e) => e.event)).not.toContain('hint');
    }
  });
});

describe('an https:// backend whose choice is learnt at the first request', () => {
  it('the hint comes then, if it chose h2', async () => {
    let edgeSession: MuxSession | undefined;
    const played = await startPlayedEdge((_hello, session) => {
      edgeSession = session;
      session.sendHello({ name: 'late', url: 'http://late.example/', urls: [] }, true);
    });
    cleanups.push(() => played.close());
    // A port that was free a moment ago: the start's probe finds nothing; the backend comes up after.
    const probe = createServer().listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const free = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const tunnel = await connect({ target: `https://localhost:${free}`, server: played.url, insecure: true });
    cleanups.push(() => tunnel.close(0));
    const hinted = once(tunnel, 'hint');
    const certs = await makeCertificates();
    cleanups.push(() => certs.dispose());
    const backend = createSecureServer({ ...certs.selfSigned });
    backend.on('stream', (stream) => {
      stream.respond({ ':status': 200 });
      stream.end('ok');
    });
    const sessions = new Set<import('node:http2').ServerHttp2Session>();
    backend.on('session', (session) => sessions.add(session));
    backend.listen(free, '127.0.0.1');
    await once(backend, 'listening');
    cleanups.push(async () => {
      // The agent keeps its connection: closed first, so that the server's close has nothing to wait for.
      await tunnel.close(0);
      for (const session of sessions) session.destroy();
      await new Promise((resolve) => backend.close(resolve));
    });
    const stream = edgeSession!.openStream();
    stream.handler = {
      onHeaders: () => {},
      onData: (chunk) => stream.consume(chunk.length),
      onEnd: () => {},
      onReset: () => {},
      onDrain: () => {},
    };
    stream.sendHeaders(
      encodeRequestHead({ method: 'GET', target: '/', headers: ['host', 'late.example'] }, 65536),
      true,
    );
    const [hint] = (await hinted) as [{ code: string; message: string }];
    expect(hint.code).toBe(EDGE_NO_HTTP2_HINT);
    expect(hint.message).toContain('h2 backend');
    expect(tunnel.backendProtocol).toBe('h2');
  });
});

describe('tunnel2 start', () => {
  it('h2c: true in the file: its ready says h2c, and the hint carries its tunnel name', async () => {
    const edge = await playedEdge({});
    const backend = await startH2Backend();
    cleanups.push(() => backend.close());
    const dir = await mkdtemp(join(tmpdir(), 'tunnel2-h2-config-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const config = join(dir, 'tunnel2.yml');
    await writeFile(
      config,
      [
        'tunnels:',
        `  grpc: { target: ${backend.port}, h2c: true }`,
        `  web: { target: ${backend.port} }`,
      ].join('\n'),
    );
    const agent: Spawned = spawnCli(['start', '--all', '--config', config, '--server', edge.url, '--json']);
    cleanups.push(() => agent.kill('SIGKILL'));
    const hint = await agent.waitFor('hint');
    expect(hint).toMatchObject({ tunnel: 'grpc', code: EDGE_NO_HTTP2_HINT });
    const ready = agent.events.filter((e) => e.event === 'ready');
    expect(Object.fromEntries(ready.map((e) => [e.tunnel, e.backendProtocol]))).toEqual({
      grpc: 'h2c',
      web: 'http/1.1',
    });
    expect(agent.events.filter((e) => e.event === 'hint')).toHaveLength(1);
  });
});

describe('the human ready line', () => {
  it('names the backend protocol after the target', async () => {
    const edge = await playedEdge({ http2: true });
    const backend = await startH2Backend();
    cleanups.push(() => backend.close());
    const agent: Spawned = spawnCli([
      'http',
      String(backend.port),
      '--h2c',
      '--server',
      edge.url,
      '--no-tty',
    ]);
    cleanups.push(() => agent.kill('SIGKILL'));
    // Lines that are not JSON arrive as `text` events; the first is the forwarding line.
    const line = await agent.waitFor('text');
    expect(line.line).toBe(
      `tunnel2: forwarding http://played.example/ -> http://localhost:${backend.port} (h2c)`,
    );
  });
});

describe('usage errors', () => {
  it('--h2c with --http1, and --h2c with an https:// target, exit 2 with one line', async () => {
    const both = await cli(['http', '3000', '--h2c', '--http1']);
    expect(both.code).toBe(2);
    expect(both.stderr).toBe(
      'tunnel2: --h2c and --http1 contradict each other: --h2c speaks HTTP/2 to the backend, --http1 HTTP/1.1 only\n',
    );
    const https = await cli(['http', 'https://localhost:8443', '--h2c']);
    expect(https.code).toBe(2);
    expect(https.stderr).toMatch(
      /^tunnel2: --h2c is HTTP\/2 over plain TCP: an https:\/\/ target gets h2 by ALPN/,
    );
    expect(https.stderr.split('\n')).toHaveLength(2);
  });

  it('--help lists --h2c and --http1', async () => {
    const help = await cli(['http', '--help']);
    expect(help.stdout).toContain('--h2c');
    expect(help.stdout).toContain('--http1');
  });
});
