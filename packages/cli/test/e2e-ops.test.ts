import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { type IncomingMessage, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterEach, describe, expect, it } from 'vitest';
import { send } from './support/http-client.js';
import { cli, type Spawned, spawnCli } from './support/processes.js';

type LogLine = Record<string, unknown>;

/** Collects a process's JSON log lines (stderr) and lets a test wait for the first that matches. */
function logLines(stream: Readable) {
  const lines: LogLine[] = [];
  const waiters: { match: (line: LogLine) => boolean; resolve: (line: LogLine) => void }[] = [];
  createInterface({ input: stream }).on('line', (text) => {
    let line: LogLine;
    try {
      line = JSON.parse(text) as LogLine;
    } catch {
      return;
    }
    lines.push(line);
    for (const waiter of [...waiters]) {
      if (waiter.match(line)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(line);
      }
    }
  });
  return {
    lines,
    waitFor(match: (line: LogLine) => boolean): Promise<LogLine> {
      const seen = lines.find(match);
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolve) => waiters.push({ match, resolve }));
    },
  };
}

/** Prometheus text as `name{labels}` → value. */
function parseMetrics(text: string): Map<string, number> {
  const values = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    values.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return values;
}

/** A GET on a fresh connection (no pooled socket can outlive the edge it was opened to). */
async function get(url: string) {
  const { port, pathname, host } = new URL(url);
  const res = await send({ port: Number(port), path: pathname, headers: ['Host', host] });
  return { status: res.status, body: res.body.toString(), type: res.headers['content-type'] };
}

const TOKEN = 'agent-token-7f3c1d9e';
const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function startStack(extraEdgeArgs: string[] = []) {
  const dir = await mkdtemp(join(tmpdir(), 'tunnel2-ops-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  // Settings from all three sources: the file (admin port, tokens), a variable and flags. No startup grace:
  // the counters below expect an unknown name's prompt 404 (the grace: e2e-edge-restart.test.ts).
  const config = join(dir, 'edge.json');
  await writeFile(
    config,
    JSON.stringify({ adminPort: 0, tokens: [TOKEN], drainTimeoutMs: 10_000, startupGraceMs: 0 }),
  );
  const backend = await createTestBackend();
  cleanups.push(() => backend.close());
  const edge: Spawned = spawnCli(
    ['server', '--config', config, '--port', '0', '--json', '--log-level', 'debug', ...extraEdgeArgs],
    { TUNNEL2_LOG_FORMAT: 'json' },
  );
  cleanups.push(() => edge.kill('SIGKILL'));
  const edgeLog = logLines(edge.child.stderr!);
  const listening = await edge.waitFor('listening');
  const url = String(listening.url);
  const adminUrl = String(listening.adminUrl);
  const agent = spawnCli([
    'http',
    String(backend.port),
    '--server',
    url,
    '--token',
    TOKEN,
    '--subdomain',
    'opsapp',
    '--json',
    '--log-level',
    'debug',
  ]);
  cleanups.push(() => agent.kill('SIGKILL'));
  const agentLog = logLines(agent.child.stderr!);
  await agent.waitFor('ready');
  return { edge, edgeLog, agent, agentLog, url, adminUrl, port: Number(new URL(url).port) };
}

describe('operations endpoints and metrics', () => {
  it('serves /healthz, /readyz and /metrics on the admin port only, and the counters move with real traffic', async () => {
    const { url, adminUrl, port, edge } = await startStack();
    expect(new URL(adminUrl).port).not.toBe(String(port));

    expect(await get(`${adminUrl}/healthz`)).toMatchObject({ status: 200, body: 'ok\n' });
    const ready = await get(`${adminUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.body)).toEqual({ ready: true, accepting: true, registry: 'ok' });
    expect((await get(`${adminUrl}/nope`)).status).toBe(404);
    // The public port never answers the operations paths: they are just unknown there.
    for (const path of ['/metrics', '/healthz', '/readyz']) {
      const answer = await get(`${url}${path}`);
      expect(answer.status).toBe(404);
      expect(answer.body).not.toContain('tunnel2_');
    }

    const before = parseMetrics((await get(`${adminUrl}/metrics`)).body);
    expect(before.get('tunnel2_sessions_connected')).toBe(1);

    for (let i = 0; i < 3; i++) {
      const res = await send({ port, path: '/loadtest/ping', headers: ['Host', `opsapp.localhost:${port}`] });
      expect(res.status).toBe(200);
    }
    const upload = await send({
      port,
      method: 'POST',
      path: '/session/opsapp/upload',
      headers: [
        'Host',
        `127.0.0.1:${port}`,
        'Content-Type',
        'application/octet-stream',
        'Content-Length',
        '100000',
      ],
      body: Buffer.alloc(100_000, 7),
    });
    expect(upload.status).toBe(200);
    const missing = await send({ port, path: '/', headers: ['Host', `nosuchtunnel.localhost:${port}`] });
    expect(missing.status).toBe(404);
    expect(
      (await send({ port, path: '/session/opsapp/status/503', headers: ['Host', `127.0.0.1:${port}`] }))
        .status,
    ).toBe(503);
    // An agent with a wrong token is refused: a rejection for reason "auth".
    const intruder = spawnCli(['http', '1', '--server', url, '--token', 'wrong-token', '--json']);
    cleanups.push(() => intruder.kill('SIGKILL'));
    expect(await intruder.exited).toBe(1);

    const response = await get(`${adminUrl}/metrics`);
    expect(response.type).toMatch(/^text\/plain; version=0\.0\.4/);
    const after = parseMetrics(response.body);
    const moved = (name: string): number => (after.get(name) ?? 0) - (before.get(name) ?? 0);
    expect(after.get('tunnel2_sessions_connected')).toBe(1);
    expect(after.get('tunnel2_streams_open')).toBe(0);
    expect(after.get('tunnel2_requests_in_flight')).toBe(0);
    expect(moved('tunnel2_http_requests_total{class="2xx"}')).toBe(4);
    expect(moved('tunnel2_http_requests_total{class="4xx"}')).toBe(1);
    expect(moved('tunnel2_http_requests_total{class="5xx"}')).toBe(1);
    expect(moved('tunnel2_http_request_duration_seconds_count')).toBe(4 + 1 + 1);
    expect(moved('tunnel2_rejected_total{reason="unknown_session",code="TUNNEL2_ERR_UNKNOWN_SESSION"}')).toBe(
      1,
    );
    expect(moved('tunnel2_rejected_total{reason="auth",code="TUNNEL2_ERR_AGENT_TOKEN_INVALID"}')).toBe(1);
    expect(moved('tunnel2_agent_connections_total')).toBe(1);
    expect(moved('tunnel2_bytes_received_total{side="public"}')).toBeGreaterThan(100_000);
    expect(moved('tunnel2_bytes_sent_total{side="agent"}')).toBeGreaterThan(100_000);
    expect(moved('tunnel2_bytes_received_total{side="agent"}')).toBeGreaterThan(0);
    expect(moved('tunnel2_frames_received_total')).toBeGreaterThanOrEqual(5 * 2);
    expect(moved('tunnel2_frames_sent_total')).toBeGreaterThanOrEqual(5 + 2);
    expect(after.has('tunnel2_websocket_buffered_bytes')).toBe(true);
    expect(after.get(`tunnel2_build_info{version="0.1.0",node="${process.versions.node}"}`)).toBe(1);
    // Event-loop delay and the process metrics come from prom-client's defaults.
    expect(after.get('nodejs_eventloop_lag_p99_seconds')).toBeGreaterThanOrEqual(0);
    expect(after.get('process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(after.has('process_cpu_user_seconds_total')).toBe(true);

    edge.kill('SIGTERM');
    expect(await edge.exited).toBe(0);
  });

  it('serves the operations paths on the public port only when told to', async () => {
    const { url } = await startStack(['--ops-on-public-port']);
    expect(await get(`${url}/healthz`)).toMatchObject({ status: 200, body: 'ok\n' });
    expect((await get(`${url}/metrics`)).body).toContain('tunnel2_sessions_connected 1');
  });

  it('on SIGTERM turns not-ready at once, lets the in-flight response finish, then exits 0', async () => {
    const { edge, edgeLog, adminUrl, port } = await startStack();
    // A response streaming for about two seconds: once its head is here, it is in flight.
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      request({ host: '127.0.0.1', port, path: '/session/opsapp/stream/10?interval=200', agent: false })
        .on('response', resolve)
        .on('error', reject)
        .end();
    });
    const body = (async () => {
      let text = '';
      for await (const chunk of response) text += String(chunk);
      return text;
    })();
    edge.kill('SIGTERM');
    await edgeLog.waitFor((l) => l.msg === 'draining');
    const ready = await get(`${adminUrl}/readyz`);
    expect(ready.status).toBe(503);
    expect(JSON.parse(ready.body)).toEqual({ ready: false, accepting: false, registry: 'ok' });
    expect((await get(`${adminUrl}/healthz`)).status).toBe(200);
    expect(await body).toBe(Array.from({ length: 10 }, (_, i) => `chunk ${i}\n`).join(''));
    expect(await edge.exited).toBe(0);
    expect(edgeLog.lines.some((l) => l.msg === 'stopped')).toBe(true);
  });
});

describe('structured logs', () => {
  it('one request id follows a request from the edge log to the agent log; credentials never appear', async () => {
    const { edge, edgeLog, agentLog, port } = await startStack();
    const res = await send({
      port,
      path: '/loadtest/ping',
      headers: ['Host', `opsapp.localhost:${port}`, 'Authorization', 'Bearer public-secret-4411'],
    });
    expect(res.status).toBe(200);
    const edgeLine = await edgeLog.waitFor((l) => l.msg === 'request' && l.session === 'opsapp');
    const requestId = edgeLine.requestId;
    expect(requestId).toMatch(/^[0-9a-f]{16}-[0-9a-z]+$/);
    expect(edgeLine).toMatchObject({ level: 20, method: 'GET', status: 200, url: '/loadtest/ping' });
    const agentLine = await agentLog.waitFor((l) => l.msg === 'request done' && l.requestId === requestId);
    expect(agentLine).toMatchObject({ method: 'GET', path: '/loadtest/ping', status: 200 });

    // An id set by a proxy in front is kept end to end, and the backend receives it.
    const echoed = await send({
      port,
      path: '/session/opsapp/echo/request/x',
      headers: ['Host', `127.0.0.1:${port}`, 'X-Request-Id', 'lb-trace-0042'],
    });
    expect(JSON.parse(echoed.body.toString()).rawHeaders).toContain('lb-trace-0042');
    await edgeLog.waitFor((l) => l.msg === 'request' && l.requestId === 'lb-trace-0042');
    await agentLog.waitFor((l) => l.msg === 'request done' && l.requestId === 'lb-trace-0042');

    edge.kill('SIGTERM');
    expect(await edge.exited).toBe(0);
    const startup = edgeLog.lines.find((l) => l.msg === 'edge listening');
    expect(startup).toMatchObject({ config: { tokens: '<redacted>', logLevel: 'debug' } });
    for (const output of [edge.stderr(), JSON.stringify(edge.events)]) {
      expect(output).not.toContain(TOKEN);
      expect(output).not.toContain('public-secret-4411');
    }
  });
});

describe('configuration through the real command', () => {
  it('a bad value fails fast, naming the setting, before anything listens', async () => {
    const viaFlag = spawnCli(['server', '--port', '0', '--response-timeout-ms', 'soon']);
    expect(await viaFlag.exited).toBe(1);
    expect(viaFlag.stderr()).toBe(
      'tunnel2 server: invalid setting responseTimeoutMs=soon (from --response-timeout-ms): must be an integer in [1, 3600000]\n',
    );
    expect(viaFlag.events).toEqual([]);
    const viaEnv = spawnCli(['server', '--port', '0'], { TUNNEL2_LOG_LEVEL: 'loud' });
    expect(await viaEnv.exited).toBe(1);
    expect(viaEnv.stderr()).toContain('invalid setting logLevel=loud (from TUNNEL2_LOG_LEVEL)');
  });

  it('--print-config shows the effective configuration with secrets redacted', async () => {
    const printed = await cli(['server', '--print-config', '--token-secret', 'a-very-long-secret-value'], {
      TUNNEL2_DOMAIN: 'tunnel.example.com',
    });
    expect(printed.code).toBe(0);
    expect(JSON.parse(printed.stdout)).toMatchObject({
      domain: 'tunnel.example.com',
      tokenSecret: '<redacted>',
      port: 8080,
      adminPort: null,
    });
    expect(printed.stdout).not.toContain('a-very-long-secret-value');
  });
});
