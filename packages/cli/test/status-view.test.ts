import { describe, expect, it } from 'vitest';
import { RateWindow } from '../src/terminal/rate-window.js';
import { renderStatus, type StatusSnapshot } from '../src/terminal/status-view.js';

// Built from a string: the linter refuses control characters in a regex literal.
const SGR = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');

function snapshot(over: Partial<StatusSnapshot> = {}): StatusSnapshot {
  return {
    tunnels: [
      {
        name: 'app',
        url: 'http://app.localhost:8080/',
        urls: ['http://app.localhost:8080/', 'http://localhost:8080/session/app/'],
        target: 'http://localhost:3000',
      },
    ],
    state: { kind: 'online' },
    rttMs: 1.234,
    activity: [{ unit: 'requests', total: 12, perMinute: 3 }],
    open: 1,
    ...over,
  };
}

const inspected = snapshot({
  tunnels: snapshot().tunnels.map((row) => ({ ...row, inspectorUrl: 'http://127.0.0.1:4040' })),
});

describe('renderStatus', () => {
  it('lays out state, round trip, counts, URLs, target and inspector', () => {
    expect(renderStatus(inspected, 100, false)).toEqual([
      'tunnel2  online   rtt 1.2 ms   requests 12 (3/min)   open 1',
      '  http://app.localhost:8080/ -> http://localhost:3000',
      '  also http://localhost:8080/session/app/',
      '  inspector http://127.0.0.1:4040',
      '─'.repeat(100),
    ]);
  });

  it('a replica: its URL line says how many agents served the name when it connected', () => {
    const replica = snapshot({ tunnels: snapshot().tunnels.map((row) => ({ ...row, replicas: 3 })) });
    expect(renderStatus(replica, 100, false)[1]).toBe(
      '  http://app.localhost:8080/ -> http://localhost:3000   replicas 3',
    );
  });

  it('names the state: connecting, reconnecting with its attempt, draining, offline; no round trip yet is a dash', () => {
    const first = (s: StatusSnapshot) => renderStatus(s, 200, false)[0];
    expect(first(snapshot({ state: { kind: 'reconnecting', attempt: 3 }, rttMs: 0 }))).toMatch(
      /^tunnel2 {2}reconnecting \(attempt 3\) {3}rtt - {3}/,
    );
    for (const kind of ['connecting', 'draining', 'offline'] as const) {
      expect(first(snapshot({ state: { kind } }))).toContain(`  ${kind}  `);
    }
    expect(
      first(snapshot({ rttMs: 42.7, activity: [{ unit: 'connections', total: 12, perMinute: 0 }] })),
    ).toContain('rtt 43 ms   connections 12');
  });

  it('cuts every line to the width with an ellipsis, colours or not, and never wraps', () => {
    for (const width of [1, 5, 20, 33, 60]) {
      for (const colour of [false, true]) {
        const lines = renderStatus(inspected, width, colour);
        for (const line of lines) expect([...line.replace(SGR, '')].length).toBeLessThanOrEqual(width);
      }
    }
    const [top, url] = renderStatus(snapshot(), 20, false);
    expect(top).toBe('tunnel2  online   r…');
    expect(url).toBe('  http://app.localh…');
  });

  it('colours the state and URL only when asked, and resets after each styled part', () => {
    const plain = renderStatus(snapshot(), 100, false);
    const coloured = renderStatus(snapshot(), 100, true);
    expect(plain.join('')).not.toMatch(SGR);
    expect(coloured[0]).toContain('\x1b[32monline\x1b[0m');
    expect(coloured.map((line) => line.replace(SGR, ''))).toEqual(plain);
    expect(renderStatus(snapshot({ state: { kind: 'offline' } }), 100, true)[0]).toContain('\x1b[31moffline');
  });

  it('lists several tunnels, each named', () => {
    const tunnels = [
      { name: 'web', url: 'http://web.l/', urls: ['http://web.l/'], target: 'http://localhost:5173' },
      { name: 'api', url: 'http://api.l/', urls: ['http://api.l/'], target: 'http://localhost:8000' },
    ];
    expect(renderStatus(snapshot({ tunnels }), 80, false).slice(1, 3)).toEqual([
      '  web  http://web.l/ -> http://localhost:5173',
      '  api  http://api.l/ -> http://localhost:8000',
    ]);
  });

  it('leads with config-file labels (even a single tunnel) and counts requests and connections apart', () => {
    const tunnels = [
      {
        name: 'x1',
        label: 'web',
        url: 'http://x1.l/',
        urls: ['http://x1.l/'],
        target: 'http://localhost:5173',
      },
      {
        name: 'x2',
        label: 'db',
        url: 'tcp://l:20001',
        urls: ['tcp://l:20001'],
        target: 'tcp://localhost:5432',
      },
    ];
    const activity = [
      { unit: 'requests', total: 4, perMinute: 4 },
      { unit: 'connections', total: 1, perMinute: 1 },
    ] as const;
    const lines = renderStatus(snapshot({ tunnels, activity }), 100, false);
    expect(lines[0]).toBe(
      'tunnel2  online   rtt 1.2 ms   requests 4 (4/min)   connections 1 (1/min)   open 1',
    );
    expect(lines.slice(1, 3)).toEqual([
      '  web  http://x1.l/ -> http://localhost:5173',
      '  db   tcp://l:20001 -> tcp://localhost:5432',
    ]);
    const single = renderStatus(snapshot({ tunnels: tunnels.slice(0, 1) }), 100, false);
    expect(single[1]).toBe('  web  http://x1.l/ -> http://localhost:5173');
  });
});

describe('RateWindow', () => {
  it('counts the last 60 seconds and forgets older events, second by second', () => {
    let now = 1_000_000;
    const rate = new RateWindow(() => now);
    rate.hit();
    rate.hit();
    now += 30_000;
    rate.hit();
    expect(rate.perMinute()).toBe(3);
    now += 29_999;
    expect(rate.perMinute()).toBe(3);
    now += 1_001;
    expect(rate.perMinute()).toBe(1);
    now += 30_000;
    expect(rate.perMinute()).toBe(0);
  });

  it('survives a long silence and a clock that goes back', () => {
    let now = 5_000;
    const rate = new RateWindow(() => now);
    for (let i = 0; i < 100; i++) rate.hit();
    now += 3_600_000;
    expect(rate.perMinute()).toBe(0);
    rate.hit();
    now -= 10_000;
    expect(rate.perMinute()).toBe(0);
    rate.hit();
    expect(rate.perMinute()).toBe(1);
  });
});
