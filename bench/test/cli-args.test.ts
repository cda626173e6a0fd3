import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BenchError, BenchErrorCode } from '../src/errors.js';
import { parseBenchArgs } from '../src/plan/cli-args.js';
import { redactArgv, statusMatcher } from '../src/plan/request-shape.js';
import { planStages } from '../src/plan/scenarios.js';

const parse = (...argv: string[]) => {
  const parsed = parseBenchArgs(argv, '/work', '/repo/bench/results', new Date('2026-01-02T03:04:05Z'));
  if (parsed.help) throw new Error('unexpected help');
  return parsed.options;
};

function usage(...argv: string[]): string {
  try {
    parseBenchArgs(argv, '/work', '/repo/bench/results');
  } catch (err) {
    expect(err).toBeInstanceOf(BenchError);
    expect((err as BenchError).code).toBe(BenchErrorCode.USAGE);
    return (err as BenchError).message;
  }
  throw new Error(`no usage error for ${argv.join(' ')}`);
}

describe('--replicas', () => {
  it("one agent by default; n agents on the tunnel side, each with its own backend, only in the kit's own stack", () => {
    expect(parse('ramp').replicas).toBe(1);
    expect(parse('ramp', '--replicas', '2').replicas).toBe(2);
    expect(usage('ramp', '--replicas', '0')).toMatch(/^--replicas "0"/);
    expect(usage('ramp', '--replicas', '9')).toMatch(/^--replicas 9: at most 8/);
    for (const other of [
      ['--target', '3000'],
      ['--inspect', 'both'],
    ]) {
      expect(usage('ramp', '--replicas', '2', ...other)).toMatch(/^--replicas starts its own backends/);
    }
  });
});

describe('scenario defaults', () => {
  it('ramp: 20 → 1000 RPS, 30 s stages, 10 s warm-up, both sides, one connection per 10 RPS', () => {
    const options = parse('ramp');
    expect(options.rates).toEqual([20, 50, 100, 200, 500, 1000]);
    expect(options.durationSec).toBe(30);
    expect(options.warmupSec).toBe(10);
    expect(options.sides).toEqual(['direct', 'tunnel']);
    expect(options.inspect).toBe(process.env.BENCH_INSPECT === 'off' ? 'off' : 'on');
    expect(options.path).toBe('/loadtest/get');
    expect(options.outDir).toBe('/repo/bench/results/ramp-2026-01-02-03-04-05');
    expect(planStages(options).map((s) => [s.targetRps, s.connections])).toEqual([
      [20, 2],
      [50, 5],
      [100, 10],
      [200, 20],
      [500, 50],
      [1000, 100],
    ]);
  });

  it('spike: 2-minute runs at 600, 800, 900, 1000 RPS', () => {
    const options = parse('spike');
    expect(options.rates).toEqual([600, 800, 900, 1000]);
    expect(options.durationSec).toBe(120);
  });

  it('constant: one rate for N minutes', () => {
    expect(parse('constant').rates).toEqual([300]);
    expect(parse('constant').durationSec).toBe(300);
    const options = parse('constant', '--rate', '400', '--minutes', '20');
    expect(options.rates).toEqual([400]);
    expect(options.durationSec).toBe(1200);
    expect(parse('constant', '--duration', '2').durationSec).toBe(2);
  });

  it('max: closed-loop stages at 50 and 100 connections', () => {
    const stages = planStages(parse('max'));
    expect(stages.map((s) => [s.mode, s.targetRps, s.connections])).toEqual([
      ['closed', null, 50],
      ['closed', null, 100],
    ]);
  });
});

describe('flags', () => {
  it('reads every flag', () => {
    const options = parse(
      'ramp',
      '--stages',
      '5,10',
      '--duration',
      '1.5',
      '--warmup',
      '0',
      '--connections',
      '3',
      '--path',
      '/loadtest/ping',
      '--timeout',
      '2',
      '--only',
      'tunnel',
      '--inspect',
      'both',
      '--out',
      'out/x',
      '--fail-under',
      '99.5',
      '--max-p99',
      '250',
    );
    expect(options).toMatchObject({
      rates: [5, 10],
      durationSec: 1.5,
      warmupSec: 0,
      connections: [3],
      path: '/loadtest/ping',
      timeoutSec: 2,
      sides: ['tunnel'],
      inspect: 'both',
      outDir: '/work/out/x',
      failUnderPct: 99.5,
      maxP99Ms: 250,
    });
    expect(planStages(options).map((s) => s.connections)).toEqual([3, 3]);
  });

  it('accepts a leading -- and --help', () => {
    expect(parse('--', 'max').scenario).toBe('max');
    expect(parseBenchArgs(['--help'], '/', '/')).toEqual({ help: true });
  });

  it('refuses mistakes with one line naming the flag', () => {
    expect(usage()).toMatch(/missing scenario/);
    expect(usage('soak')).toMatch(/unknown scenario "soak"/);
    expect(usage('ramp', '--bogus')).toBe('unknown flag --bogus');
    expect(usage('ramp', '--rates', '10')).toMatch(/^--rates does not apply to ramp/);
    expect(usage('max', '--stages', '10')).toMatch(/^--stages does not apply to max/);
    expect(usage('ramp', '--stages', '10,x')).toMatch(/^--stages "10,x"/);
    expect(usage('ramp', '--stages', '0')).toMatch(/^--stages "0"/);
    expect(usage('ramp', '--duration', '-1')).toMatch(/--duration/);
    expect(usage('ramp', '--duration', '0')).toMatch(/^--duration "0" is not a positive number/);
    expect(usage('ramp', '--connections', '5,10')).toMatch(/^--connections takes one number/);
    expect(usage('constant', '--minutes', '1', '--duration', '5')).toMatch(/--minutes and --duration/);
    expect(usage('constant', '--rate', '1.5')).toMatch(/^--rate "1.5" is not a positive integer/);
    expect(usage('ramp', '--stages', '5', '--connections', '100')).toMatch(/below --timeout/);
    expect(usage('ramp', '--timeout', '0.5')).toMatch(/^--timeout 0.5 must be within 1..600 s/);
    expect(usage('ramp', '--only', 'both')).toMatch(/^--only "both"/);
    expect(usage('max', '--inspect', 'yes')).toMatch(/^--inspect "yes" must be on, off or both/);
    expect(usage('max', '--inspect', 'both', '--only', 'direct')).toMatch(
      /^--inspect both measures the tunnel/,
    );
    expect(usage('ramp', '--fail-under', '101')).toMatch(/^--fail-under 101/);
    expect(usage('ramp', '--max-p99', 'fast')).toMatch(/^--max-p99 "fast"/);
    expect(usage('ramp', '--path', 'loadtest')).toMatch(/^--path "loadtest" must start with \//);
    expect(usage('ramp', 'now')).toMatch(/unexpected argument "now"/);
    for (const message of [usage('ramp', '--bogus'), usage('ramp', '--stages', 'x')]) {
      expect(message).not.toContain('\n');
    }
  });
});

describe('your own service: --target, --tunnel-url and the request shape', () => {
  const body = join(mkdtempSync(join(tmpdir(), 'tunnel2-bench-args-')), 'body.json');
  writeFileSync(body, '{"hello":"world"}');

  it('without them: the test backend, GET /loadtest/get, 2xx', () => {
    const options = parse('ramp');
    expect(options.targetUrl).toBeNull();
    expect(options.tunnelUrl).toBeNull();
    expect(options.request).toEqual({
      method: 'GET',
      paths: ['/loadtest/get'],
      headers: {},
      body: null,
      bodyFile: null,
      expectStatus: ['2xx'],
    });
  });

  it('--target: both sides, its path is the request path (/ when it has none)', () => {
    const options = parse('ramp', '--target', 'http://localhost:3000/health?deep=1');
    expect(options.targetUrl).toBe('http://localhost:3000/health?deep=1');
    expect(options.sides).toEqual(['direct', 'tunnel']);
    expect(options.path).toBe('/health?deep=1');
    expect(parse('max', '--target', 'https://api.example.test').request.paths).toEqual(['/']);
    expect(parse('spike', '--target', 'http://[::1]:8080/', '--only', 'direct').sides).toEqual(['direct']);
  });

  it('--target takes a port or host:port as tunnel2 http does (an http:// URL on that host)', () => {
    expect(parse('ramp', '--target', 'localhost:8000').targetUrl).toBe('http://localhost:8000/');
    expect(parse('ramp', '--target', '8000').targetUrl).toBe('http://localhost:8000/');
    expect(parse('ramp', '--target', '127.0.0.1:8000/health').targetUrl).toBe('http://127.0.0.1:8000/health');
    expect(parse('ramp', '--target', '127.0.0.1:8000/health').request.paths).toEqual(['/health']);
    expect(parse('ramp', '--target', '[::1]:8000').targetUrl).toBe('http://[::1]:8000/');
  });

  it('--tunnel-url: alone it is the tunnel side only; with --target both sides', () => {
    const alone = parse('constant', '--tunnel-url', 'https://abc.tunnel.example.test/ping');
    expect(alone.sides).toEqual(['tunnel']);
    expect(alone.tunnelUrl).toBe('https://abc.tunnel.example.test/ping');
    expect(alone.request.paths).toEqual(['/ping']);
    const both = parse(
      'ramp',
      '--target',
      'http://127.0.0.1:3000',
      '--tunnel-url',
      'http://a.localhost:8080',
    );
    expect(both.sides).toEqual(['direct', 'tunnel']);
    expect(both.request.paths).toEqual(['/']);
  });

  it('reads the request shape: method, paths (repeated and comma lists), headers, body, expected status', () => {
    const options = parse(
      'ramp',
      '--target',
      'http://localhost:3000',
      '--method',
      'post',
      '--path',
      '/a,/b',
      '--path',
      '/c',
      '--header',
      'content-type: application/json',
      '--header',
      'Authorization:Bearer secret',
      '--body-file',
      body,
      '--expect-status',
      '201,2xx',
    );
    expect(options.request).toEqual({
      method: 'POST',
      paths: ['/a', '/b', '/c'],
      headers: { 'content-type': 'application/json', authorization: 'Bearer secret' },
      body: Buffer.from('{"hello":"world"}'),
      bodyFile: body,
      expectStatus: ['201', '2xx'],
    });
  });

  it('--path: a comma inside a path or its query is part of it; only a comma before / starts the next path', () => {
    const paths = (...list: string[]): string[] =>
      parse('ramp', '--target', 'http://localhost:3000', ...list.flatMap((p) => ['--path', p])).request.paths;
    expect(paths('/echo?ids=1,2')).toEqual(['/echo?ids=1,2']);
    expect(paths('/a,b/c', '/d')).toEqual(['/a,b/c', '/d']);
    expect(paths('/a?x=1,2,/b')).toEqual(['/a?x=1,2', '/b']);
    expect(paths('/a, /b')).toEqual(['/a', '/b']);
  });

  it('matches statuses by code and by class', () => {
    const ok = statusMatcher(['201', '3xx']);
    expect([200, 201, 302, 399, 404].map(ok)).toEqual([false, true, true, true, false]);
  });

  it('redacts secret header values from the command a report quotes', () => {
    expect(
      redactArgv(['ramp', '--header', 'x-api-key: k1', '--header=cookie: a=b', '--header', 'accept: */*']),
    ).toEqual([
      'ramp',
      '--header',
      'x-api-key: <redacted>',
      '--header=cookie: <redacted>',
      '--header',
      'accept: */*',
    ]);
  });

  it('refuses each mistake with one line naming the flag', () => {
    expect(usage('ramp', '--target', 'notaport')).toBe(
      '--target "notaport" is not an http:// or https:// URL',
    );
    expect(usage('ramp', '--target', 'ftp://x/')).toMatch(/^--target "ftp:\/\/x\/" is not an http/);
    expect(usage('ramp', '--tunnel-url', 'nope')).toMatch(/^--tunnel-url "nope" is not an http/);
    expect(usage('ramp', '--target', 'http://u:p@h/')).toMatch(/^--target carries credentials/);
    expect(usage('ramp', '--tunnel-url', 'http://a.test', '--only', 'direct')).toMatch(
      /^--only direct measures --target/,
    );
    expect(usage('ramp', '--tunnel-url', 'http://a.test', '--inspect', 'both')).toMatch(
      /^--inspect both starts a second agent/,
    );
    expect(usage('ramp', '--target', 'http://h/x', '--path', '/y')).toMatch(/^--path and a path in the URL/);
    expect(usage('ramp', '--target', 'http://h/x', '--tunnel-url', 'http://t/y')).toMatch(
      /^--target asks for \/x and --tunnel-url for \/y/,
    );
    expect(usage('ramp', '--method', 'GE T')).toMatch(/^--method "GE T" is not an HTTP method/);
    expect(usage('ramp', '--header', 'nocolon')).toMatch(/^--header "nocolon" is not "name: value"/);
    expect(usage('ramp', '--header', 'Host: x')).toMatch(/^--header host is set by the kit/);
    expect(usage('ramp', '--body-file', '/nonexistent/body')).toMatch(
      /^--body-file "\/nonexistent\/body" cannot/,
    );
    expect(usage('ramp', '--expect-status', '2x')).toMatch(/^--expect-status "2x" must be a status/);
    expect(usage('ramp', '--expect-status', '600')).toMatch(/^--expect-status "600"/);
  });
});

describe('--edge-workers (tunnel2 server --workers, issue #33)', () => {
  it('runs the whole scenario once per count; absent, one run with the edge as it is', () => {
    expect(parse('max').edgeWorkers).toBeNull();
    expect(parse('max', '--edge-workers', '1,2').edgeWorkers).toEqual([1, 2]);
    expect(parse('ramp', '--edge-workers', '2').edgeWorkers).toEqual([2]);
  });

  it("needs the kit's own edge on the tunnel side", () => {
    expect(usage('max', '--edge-workers', '1,2', '--only', 'direct')).toMatch(/tunnel side/);
    expect(usage('max', '--edge-workers', '2', '--tunnel-url', 'http://t.example.com/')).toMatch(
      /tunnel side/,
    );
    expect(usage('max', '--edge-workers', '0')).toMatch(/--edge-workers/);
  });
});
