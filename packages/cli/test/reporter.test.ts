import { describe, expect, it } from 'vitest';
import type { LineOutput } from '../src/terminal/line-writer.js';
import { createHumanReporter, createJsonReporter } from '../src/terminal/reporter.js';

function human() {
  const lines: string[] = [];
  const out: LineOutput = {
    write: (line) => void lines.push(line),
    writeBatched: (line) => void lines.push(line),
    flush: () => {},
  };
  return { lines, reporter: createHumanReporter(out, (line) => void lines.push(line)) };
}

const TIME = /^\d\d:\d\d:\d\d {2}/;

describe('human reporter', () => {
  it('writes a request and a TCP connection in the same layout: time, fields, duration, why', () => {
    const { lines, reporter } = human();
    reporter.request({ method: 'GET', path: '/a', status: 200, durationMs: 1.234, bytes: 3 });
    reporter.request({
      method: 'POST',
      path: '/b',
      status: 0,
      durationMs: 2,
      bytes: 0,
      error: 'ECONNREFUSED',
    });
    reporter.connection({
      clientAddress: '::1',
      clientPort: 5,
      bytesIn: 10,
      bytesOut: 20,
      durationMs: 3.21,
      outcome: 'closed',
    });
    reporter.connection({
      clientAddress: '127.0.0.1',
      clientPort: 6,
      bytesIn: 0,
      bytesOut: 0,
      durationMs: 4,
      outcome: 'unreachable',
      error: 'ETIMEDOUT',
    });
    for (const line of lines) expect(line).toMatch(TIME);
    expect(lines.map((line) => line.replace(TIME, ''))).toEqual([
      'GET     /a  200  1.2 ms\n',
      'POST    /b  ---  2.0 ms  (ECONNREFUSED)\n',
      '[::1]:5  in 10 B  out 20 B  3.2 ms\n',
      '127.0.0.1:6  in 0 B  out 0 B  4.0 ms  (unreachable: ETIMEDOUT)\n',
    ]);
  });

  it('says so when a reconnect comes back at a new address', () => {
    const { lines, reporter } = human();
    const info = (url: string) => ({ name: 'n', url, urls: [url] });
    reporter.ready(info('tcp://localhost:1'), 'localhost:5432');
    reporter.ready(info('tcp://localhost:1'), 'localhost:5432');
    reporter.ready(info('tcp://localhost:2'), 'localhost:5432');
    expect(lines.slice(-2)).toEqual([
      'reconnected: tcp://localhost:1\n',
      'reconnected at a new address: tcp://localhost:2 (the previous one was taken)\n',
    ]);
  });
});

describe('a replica (--replica)', () => {
  it('human and --json: the ready line and event say how many agents served the name at connect', () => {
    const info = {
      name: 'shop',
      url: 'http://shop.localhost/',
      urls: ['http://shop.localhost/'],
      replicas: 3,
    };
    const { lines, reporter } = human();
    reporter.ready(info, 'http://localhost:3000');
    expect(lines).toContain('        replicas  3 agents on this name\n');
    const json: string[] = [];
    createJsonReporter({
      write: (line) => void json.push(line),
      writeBatched: (line) => void json.push(line),
      flush: () => {},
    }).ready(info, 'http://localhost:3000');
    expect(JSON.parse(json[0]!)).toMatchObject({ event: 'ready', name: 'shop', replicas: 3 });
    const { lines: plain, reporter: single } = human();
    single.ready({ name: 'n', url: 'http://n/', urls: ['http://n/'] }, 'http://localhost:3000');
    expect(plain.join('')).not.toContain('replicas');
  });

  it('human and --json: a change of the count while connected is a line and a `replicas` event', () => {
    const { lines, reporter } = human();
    reporter.replicas?.(2);
    expect(lines).toContain('        replicas  2 agents on this name now\n');
    const json: string[] = [];
    createJsonReporter({
      write: (line) => void json.push(line),
      writeBatched: (line) => void json.push(line),
      flush: () => {},
    }).replicas?.(4);
    expect(JSON.parse(json[0]!)).toMatchObject({ event: 'replicas', replicas: 4 });
  });
});

describe('stopping', () => {
  const report = { method: 'GET', path: '/slow', status: 0, durationMs: 9, bytes: 0, error: 'reset' };

  it('human: finishing says how many and how to stop now; a cut close says what it cut, and is the last line', () => {
    const { lines, reporter } = human();
    reporter.finishing(1, 'requests');
    reporter.finishing(1, 'requests and connections');
    reporter.closed({ count: 3, unit: 'requests and connections' });
    reporter.closed({ count: 1, unit: 'requests', afterMs: 5_000 });
    reporter.request(report);
    expect(lines).toEqual([
      'tunnel2: finishing 1 request (Ctrl-C again to stop now)\n',
      'tunnel2: finishing 1 request or connection (Ctrl-C again to stop now)\n',
      'tunnel2: stopped now; 3 requests and connections in flight were cut short\n',
      'tunnel2: closed; 1 request still in flight after 5 s was cut short\n',
    ]);
  });

  it('--json: finishing and closed carry the counts, and nothing comes after closed', () => {
    const lines: string[] = [];
    const out: LineOutput = {
      write: (line) => void lines.push(line),
      writeBatched: (line) => void lines.push(line),
      flush: () => {},
    };
    const reporter = createJsonReporter(out);
    reporter.finishing(2, 'connections');
    reporter.closed({ count: 2, unit: 'connections' });
    reporter.connection({
      clientAddress: '127.0.0.1',
      clientPort: 1,
      bytesIn: 0,
      bytesOut: 0,
      durationMs: 1,
      outcome: 'reset',
    });
    expect(lines.map((line) => JSON.parse(line) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ event: 'finishing', count: 2 }),
      expect.objectContaining({ event: 'closed', cut: 2 }),
    ]);
  });

  it('a TCP replica shares a port, not a name: its lines say so', () => {
    const { lines, reporter } = human();
    reporter.ready(
      {
        name: 'db',
        url: 'tcp://localhost:5000',
        urls: ['tcp://localhost:5000'],
        tcp: { port: 5000 },
        replicas: 2,
      },
      'localhost:5432',
    );
    reporter.replicas?.(3);
    expect(lines).toContain('        replicas  2 agents on this port\n');
    expect(lines).toContain('        replicas  3 agents on this port now\n');
  });
});

describe('--json request lines', () => {
  const json = (tunnel?: string) => {
    const lines: string[] = [];
    const reporter = createJsonReporter(
      {
        write: (line) => void lines.push(line),
        writeBatched: (line) => void lines.push(line),
        flush: () => {},
      },
      tunnel === undefined ? {} : { tunnel },
    );
    return { lines, reporter };
  };

  it('keep their keys in order, leave out an absent error, and carry the config tunnel name after time', () => {
    const { lines, reporter } = json();
    reporter.request({ method: 'GET', path: '/a"b', status: 200, durationMs: 1.25, bytes: 3 });
    reporter.request({ method: 'POST', path: '/b', status: 0, durationMs: 2, bytes: 0, error: 'reset' });
    const [ok, failed] = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(Object.keys(ok!)).toEqual(['event', 'time', 'method', 'path', 'status', 'durationMs', 'bytes']);
    expect(ok).toMatchObject({ event: 'request', path: '/a"b', status: 200, durationMs: 1.25, bytes: 3 });
    expect(Object.keys(failed!).at(-1)).toBe('error');
    expect(failed!.error).toBe('reset');
    expect(lines.every((line) => line.endsWith('}\n'))).toBe(true);

    const named = json('shop');
    named.reporter.request({ method: 'GET', path: '/', status: 204, durationMs: 0, bytes: 0 });
    expect(Object.keys(JSON.parse(named.lines[0]!) as object).slice(0, 4)).toEqual([
      'event',
      'time',
      'tunnel',
      'method',
    ]);
  });

  it('stamp each line with the current time in ISO 8601', () => {
    const { lines, reporter } = json();
    const before = Date.now();
    reporter.request({ method: 'GET', path: '/', status: 200, durationMs: 0, bytes: 0 });
    const time = Date.parse((JSON.parse(lines[0]!) as { time: string }).time);
    expect(time).toBeGreaterThanOrEqual(before);
    expect(time).toBeLessThanOrEqual(Date.now());
  });
});
