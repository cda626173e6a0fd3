import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgentService, startEdgeService } from '../src/stacks/bench-stack.js';
import type { ChildService } from '../src/stacks/child-service.js';
import { readReports } from './support/read-reports.js';
import { runBench } from './support/run-bench.js';

// The kit pointed at someone else's service: a plain node:http server (not tunnel2's test backend) as
// --target on both sides, an existing edge + agent as --tunnel-url, and the preflight's messages.

/** One half-second stage, no warm-up. */
const HALF_SECOND = ['--duration', '0.5', '--warmup', '0'];
const work = mkdtempSync(join(tmpdir(), 'tunnel2-bench-target-'));
const seen: { method: string; path: string; apiKey: string; body: string }[] = [];
let server: Server;
let target: string;
const services: ChildService[] = [];

/** The user's app: /a and /b answer 200 to what they were sent, /slow never answers, the rest 404. */
function app(req: IncomingMessage, res: ServerResponse): void {
  if (req.url === '/slow') return;
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const known = req.url === '/a' || req.url === '/b';
    if (seen.length < 10_000) {
      const body = Buffer.concat(chunks).toString();
      seen.push({
        method: req.method ?? '',
        path: req.url ?? '',
        apiKey: String(req.headers['x-api-key']),
        body,
      });
    }
    res.statusCode = known ? 200 : 404;
    res.end(known ? 'ok' : 'not here');
  });
}

beforeAll(async () => {
  server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  target = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const service of services.reverse()) await service.stop();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  rmSync(work, { recursive: true, force: true });
});

describe('bench against your own service', () => {
  it('--target: both sides load a plain HTTP server with the given method, paths, headers and body', async () => {
    const out = join(work, 'target');
    const body = join(work, 'body.json');
    writeFileSync(body, '{"n":1}');
    seen.length = 0;
    const run = await runBench([
      'ramp',
      '--target',
      target,
      '--method',
      'POST',
      '--path',
      '/a,/b',
      '--header',
      'content-type: application/json',
      '--header',
      'x-api-key: s3cret-value',
      '--body-file',
      body,
      '--stages',
      '20',
      '--duration',
      '1',
      '--warmup',
      '0',
      '--inspect',
      'off',
      '--out',
      out,
    ]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain(`[ramp] target ${target}/, edge http://127.0.0.1:`);
    const { json, md, html } = readReports(out);
    expect(json.settings).toMatchObject({
      targetUrl: `${target}/`,
      backendUrl: `${target}/`,
      tunnelGiven: false,
      sides: ['direct', 'tunnel'],
      request: {
        method: 'POST',
        paths: ['/a', '/b'],
        headers: { 'content-type': 'application/json', 'x-api-key': '<redacted>' },
        bodyBytes: 7,
        expectStatus: ['2xx'],
      },
    });
    for (const side of [json.stages[0]!.direct!, json.stages[0]!.tunnel!]) {
      expect(side.requests).toBeGreaterThan(10);
      expect(side.ok).toBe(side.requests);
      // The user's service is not the kit's process: it is not metered.
      expect(side.backend).toBeNull();
    }
    expect(json.stages[0]!.tunnel!.agent!.cpuMs).toBeGreaterThan(0);
    // The server saw both paths, the method, the header and the body, through both sides.
    expect(new Set(seen.map((r) => `${r.method} ${r.path} ${r.apiKey} ${r.body}`))).toEqual(
      new Set(['POST /a s3cret-value {"n":1}', 'POST /b s3cret-value {"n":1}']),
    );
    for (const text of [JSON.stringify(json), md, html]) expect(text).not.toContain('s3cret-value');
    expect(md).toContain(`direct: ${target}/ (--target) · tunnel: http://bench.localhost:`);
    expect(md).toContain('POST /a, /b · expect 2xx · headers: content-type, x-api-key · body 7 bytes');
    expect(html).toContain('(--target)');
  });

  it('--tunnel-url: an existing tunnel is the tunnel side, and the kit starts nothing', async () => {
    const edge = await startEdgeService();
    services.push(edge);
    const agent = await startAgentService(target, edge.readyValue, 'mine', false);
    services.push(agent);
    const out = join(work, 'tunnel-url');
    const run = await runBench([
      'max',
      '--tunnel-url',
      `${agent.readyValue}a`,
      ...['--connections', '2', ...HALF_SECOND, '--out', out, '--fail-under', '99'],
    ]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain(`[max] tunnel ${agent.readyValue}a`);
    expect(run.stderr).not.toContain('edge http');
    const { json, md } = readReports(out);
    expect(json.settings).toMatchObject({
      sides: ['tunnel'],
      tunnelUrl: `${agent.readyValue}a`,
      tunnelGiven: true,
      targetUrl: null,
      backendUrl: '',
    });
    const tunnel = json.stages[0]!.tunnel!;
    expect(tunnel.ok).toBe(tunnel.requests);
    expect(tunnel.requests).toBeGreaterThan(0);
    // Not the kit's processes: nothing of theirs is metered.
    expect(tunnel.edge).toBeNull();
    expect(tunnel.agent).toBeNull();
    expect(json.gate.passed).toBe(true);
    expect(md).toContain(`tunnel: ${agent.readyValue}a (--tunnel-url)`);
    expect(md).toContain("The tunnel side is the --tunnel-url given: its edge and agent are not the kit's");
    expect(md).not.toContain('The direct side');
  });

  it('--expect-status: an endpoint whose right answer is 404 is measured as a success', async () => {
    const out = join(work, 'expect');
    const run = await runBench(
      ['max', '--target', `${target}/gone`, '--expect-status', '404', '--only', 'direct'].concat([
        '--connections',
        '1',
        ...HALF_SECOND,
        '--out',
        out,
      ]),
    );
    expect(run.code, run.stderr).toBe(0);
    const { json, md } = readReports(out);
    const direct = json.stages[0]!.direct!;
    expect(direct.ok).toBe(direct.requests);
    expect(direct.errors).toEqual({});
    // Only the direct side ran, and no stage fell short: the notes say nothing of a tunnel or of ⚠.
    expect(md).toContain('The direct side hits your --target itself.');
    expect(md).not.toMatch(/tunnel side|Tunnel CPU|⚠ =/);
  });
});

describe('a target that dies after the preflight', () => {
  it('stops the run at the first stage with no answer at all, says why, and still writes the reports', async () => {
    // Answers the preflight's one request, then goes away: every later connection is refused.
    const dying = createServer((_req, res) => {
      res.end('ok', () => {
        dying.close();
        dying.closeAllConnections();
      });
    });
    await new Promise<void>((resolve) => dying.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(dying.address() as AddressInfo).port}/`;
    const out = join(work, 'dying');
    const run = await runBench(
      ['ramp', '--target', url, '--only', 'direct', '--stages', '20,40'].concat(HALF_SECOND, ['--out', out]),
    );
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(
      /bench: the run stopped early: no request got an answer \(refused \d+\): is the service still running\? \(during stage 1, direct side\)/,
    );
    const { json, md } = readReports(out);
    expect(json.stages).toHaveLength(1);
    expect(json.stages[0]!.direct!.errors.refused).toBeGreaterThan(0);
    expect(md).toContain('**The run stopped early:** no request got an answer');
  });
});

describe('the preflight: a clear message before any load', () => {
  const short = ['--stages', '20', '--duration', '1', '--warmup', '0'];

  it('a bad URL exits 2 and names it', async () => {
    // localhost:3000 is a target now, as tunnel2 http takes it; another scheme is not.
    const run = await runBench(['ramp', '--target', 'ftp://localhost:3000', ...short]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(
      /^bench: --target "ftp:\/\/localhost:3000" is not an http:\/\/ or https:\/\/ URL\n/,
    );
  });

  it('an unreachable target exits 3 and says so, before starting an edge', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const out = join(work, 'never-1');
    const run = await runBench([
      'ramp',
      '--target',
      `http://127.0.0.1:${port}/health`,
      ...short,
      '--out',
      out,
    ]);
    expect(run.code).toBe(3);
    expect(run.stderr).toContain(
      `bench: the direct side is unreachable: GET http://127.0.0.1:${port}/health failed (ECONNREFUSED); ` +
        'is the service running and listening at that address?',
    );
    expect(run.stderr).not.toContain('edge http');
  });

  it('an unexpected status exits 3 with the status and the --expect-status hint', async () => {
    const run = await runBench([
      'ramp',
      '--target',
      `${target}/missing`,
      ...short,
      '--out',
      join(work, 'n2'),
    ]);
    expect(run.code).toBe(3);
    expect(run.stderr).toContain(
      `bench: GET ${target}/missing answered 404 on the direct side, expected 2xx; ` +
        'if 404 is the right answer for this endpoint, pass --expect-status 404',
    );
  });

  it('a target that does not answer within --timeout exits 3 and says so', async () => {
    const run = await runBench([
      'ramp',
      '--target',
      `${target}/slow`,
      '--timeout',
      '1',
      ...short,
      '--out',
      join(work, 'n3'),
    ]);
    expect(run.code).toBe(3);
    expect(run.stderr).toContain(`bench: the direct side did not answer GET ${target}/slow within 1 s`);
  });

  it('the tunnel side is checked too: a --tunnel-url with no tunnel behind it', async () => {
    const edge = await startEdgeService();
    services.push(edge);
    const host = new URL(edge.readyValue).port;
    const run = await runBench([
      'ramp',
      '--tunnel-url',
      `http://nobody.localhost:${host}/a`,
      ...short,
      '--out',
      join(work, 'n4'),
    ]);
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(
      new RegExp(
        `bench: GET http://nobody\\.localhost:${host}/a answered \\d{3} on the tunnel side, expected 2xx`,
      ),
    );
  });

  it('a standalone scenario refuses --target by name', async () => {
    const run = await runBench(['bulk', '--target', target]);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe('bench: --target applies to ramp, spike, constant and max, not bulk\n');
  });
});
