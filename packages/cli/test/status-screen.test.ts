import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { SessionStats } from '../src/session/agent-session.js';
import type { LineOutput } from '../src/terminal/line-writer.js';
import { createStatusScreen } from '../src/terminal/status-screen.js';
import type { Terminal, TerminalSize } from '../src/terminal/terminal.js';

const info = { name: 'app', url: 'http://app.localhost:8080/', urls: ['http://app.localhost:8080/'] };
const request = { method: 'GET', path: '/a', status: 404, durationMs: 1, bytes: 0 };

function screen(colour = false) {
  const writes: string[] = [];
  const errs: string[] = [];
  let size: TerminalSize = { columns: 60, rows: 10 };
  let resized: (() => void) | undefined;
  const terminal: Terminal = {
    size: () => size,
    onResize(listener) {
      resized = listener;
      return () => {
        resized = undefined;
      };
    },
  };
  const out: LineOutput = {
    write: (text) => void writes.push(text),
    writeBatched: (text) => void writes.push(text),
    flush: () => {},
  };
  const stats: { sessionStats: SessionStats | undefined } = {
    sessionStats: { rttMs: 2, openStreams: 0, draining: false },
  };
  const view = createStatusScreen({ out, err: (line) => void errs.push(line), terminal, colour });
  view.watch(stats, 'requests');
  const frames = () => writes.filter((w) => w.includes('\x1b7'));
  const resize = (next: TerminalSize) => {
    size = next;
    resized?.();
  };
  return { view, writes, errs, frames, stats, resize };
}

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

describe('the status screen', () => {
  it('draws nothing before the first ready, then sets up the scroll region and the header in one write', () => {
    const { view, writes } = screen();
    expect(writes).toEqual([]);
    view.ready(info, 'http://localhost:3000');
    expect(writes).toHaveLength(1);
    const [first] = writes;
    // Newlines push the old screen into the scrollback; rows 4..10 scroll, the header owns 1..3.
    expect(
      first?.startsWith(`\x1b[?25l${'\n'.repeat(10)}\x1b[4;10r\x1b[4;1H\x1b7\x1b[1;1H\x1b[2Ktunnel2  online`),
    ).toBe(true);
    expect(first).toContain('\x1b[2;1H\x1b[2K  http://app.localhost:8080/ -> http://localhost:3000');
    expect(first?.endsWith('\x1b8\x1b[?25h')).toBe(true);
  });

  it('redraws at most once per refresh however many requests, and not at all when nothing changed', () => {
    const { view, writes, frames } = screen();
    view.ready(info, 'http://localhost:3000');
    for (let i = 0; i < 1000; i++) view.request(request);
    expect(frames()).toHaveLength(1);
    vi.advanceTimersByTime(250);
    expect(frames()).toHaveLength(2);
    expect(frames()[1]).toContain('requests 1000 (1000/min)');
    // A request line each, in the plain log's layout.
    expect(writes.filter((w) => w.includes('GET     /a  404'))).toHaveLength(1000);
    vi.advanceTimersByTime(10_000);
    expect(frames()).toHaveLength(2);
  });

  it('shows draining from the session, reconnecting from the tunnel, and a changed round trip', () => {
    const { view, frames, stats, errs } = screen();
    view.ready(info, 'http://localhost:3000');
    stats.sessionStats = { rttMs: 35, openStreams: 2, draining: true };
    vi.advanceTimersByTime(5_000);
    expect(frames().at(-1)).toContain('draining   rtt 35 ms   requests 0 (0/min)   open 2');
    stats.sessionStats = undefined;
    view.reconnecting({ attempt: 2, delayMs: 1000, reason: 'gone' });
    vi.advanceTimersByTime(250);
    expect(frames().at(-1)).toContain('reconnecting (attempt 2)   rtt -');
    expect(errs).toEqual(['tunnel2: connection lost (gone); reconnecting in 1.0 s (attempt 2)\n']);
    view.ready(info, 'http://localhost:3000');
    vi.advanceTimersByTime(250);
    expect(frames().at(-1)).toContain('online');
  });

  it('lays the screen out again after a resize, cut to the new width', () => {
    const { view, frames, resize } = screen();
    view.ready(info, 'http://localhost:3000');
    resize({ columns: 20, rows: 6 });
    vi.advanceTimersByTime(250);
    const frame = frames().at(-1) ?? '';
    expect(frame).toContain('\x1b[2J\x1b[4;6r');
    expect(frame).toContain('\x1b[2;1H\x1b[2K  http://app.localh…');
  });

  it('after a resize draws the latest log lines again below the header, as many as fit', () => {
    const { view, frames, resize, errs } = screen();
    view.ready(info, 'http://localhost:3000');
    for (const path of ['/1', '/2', '/3', '/4']) view.request({ ...request, path });
    view.reconnecting({ attempt: 1, delayMs: 0, reason: 'gone' });
    expect(errs.at(-1)).toMatch(/^tunnel2: connection lost/);
    // 7 rows: 3 of header, 4 below it, the last of them left for the cursor (80 columns: no line wraps).
    resize({ columns: 80, rows: 7 });
    vi.advanceTimersByTime(250);
    const region = '\x1b[4;7r\x1b[4;1H';
    const logRows = (): string[] => {
      const frame = frames().at(-1) ?? '';
      const log = frame.slice(frame.indexOf(region) + region.length, frame.indexOf('\x1b7'));
      return log.split('\n').map((line) => line.replace(/^\d\d:\d\d:\d\d {2}/, ''));
    };
    expect(logRows()).toEqual([
      'GET     /3  404  1.0 ms',
      'GET     /4  404  1.0 ms',
      'tunnel2: connection lost (gone); reconnecting in 0.0 s (attempt 1)',
      '',
    ]);
    // At 60 columns the reconnect line takes two rows, so one request line fewer fits.
    resize({ columns: 60, rows: 7 });
    vi.advanceTimersByTime(250);
    expect(logRows()).toEqual([
      'GET     /4  404  1.0 ms',
      'tunnel2: connection lost (gone); reconnecting in 0.0 s (attempt 1)',
      '',
    ]);
  });

  it('finishing: the header and a log line say how many are still in flight; closed with a cut says what it cut', () => {
    const { view, frames, writes, errs, stats } = screen(true);
    view.ready(info, 'x');
    stats.sessionStats = { rttMs: 2, openStreams: 2, draining: true };
    view.finishing(2, 'requests');
    expect(writes).toContain('tunnel2: finishing 2 requests (Ctrl-C again to stop now)\n');
    expect(frames().at(-1)).toContain('finishing 2 requests (Ctrl-C again to stop now)');
    // The count follows the requests as they finish.
    stats.sessionStats = { rttMs: 2, openStreams: 1, draining: true };
    vi.advanceTimersByTime(250);
    expect(frames().at(-1)).toContain('finishing 1 request (Ctrl-C again to stop now)');
    view.closed({ count: 1, unit: 'requests' });
    // With colour on, the reset of colours comes last, before the cursor is shown again.
    expect(writes.at(-1)?.endsWith('\x1b7\x1b[r\x1b8\x1b[0m\x1b[?25h')).toBe(true);
    expect(errs.at(-1)).toBe('tunnel2: stopped now; 1 request in flight was cut short\n');
    expect(view.active).toBe(false);
  });

  it('colours request statuses only with colour on', () => {
    const plain = screen(false);
    plain.view.ready(info, 'x');
    plain.view.request(request);
    expect(plain.writes.at(-1)).not.toContain('\x1b[');
    const coloured = screen(true);
    coloured.view.ready(info, 'x');
    coloured.view.request(request);
    expect(coloured.writes.at(-1)).toContain('\x1b[33m404\x1b[0m');
  });

  it('on close: a last header saying offline, the scroll region reset, the cursor where the log ended', () => {
    const { view, writes, errs } = screen();
    view.ready(info, 'x');
    view.closed();
    expect(writes.at(-1)).toContain('offline');
    // Without colour no SGR at all, the reset neither.
    expect(writes.at(-1)?.endsWith('\x1b8\x1b[?25h\x1b7\x1b[r\x1b8\x1b[?25h')).toBe(true);
    expect(errs.at(-1)).toBe('tunnel2: closed\n');
    const count = writes.length;
    vi.advanceTimersByTime(10_000);
    expect(writes).toHaveLength(count);
  });

  it('a random name replaced after a reconnect: one row, the new address, and a line saying so', () => {
    const { view, frames, writes } = screen();
    view.ready(info, 'http://localhost:3000');
    view.reconnecting({ attempt: 1, delayMs: 0, reason: 'gone' });
    const renamed = { name: 'new', url: 'http://new.localhost:8080/', urls: ['http://new.localhost:8080/'] };
    view.ready(renamed, 'http://localhost:3000');
    vi.advanceTimersByTime(250);
    const frame = frames().at(-1) ?? '';
    expect(frame).toContain('http://new.localhost:8080/');
    expect(frame).not.toContain('http://app.localhost:8080/');
    expect(writes).toContain(
      'reconnected at a new address: http://new.localhost:8080/ (the previous one was taken)\n',
    );
  });

  it('shows each tunnel its own inspector, under its row', () => {
    const { view, frames } = screen();
    const web = view.tunnel('web', 'requests');
    const api = view.tunnel('api', 'requests');
    web.ready(info, 'http://localhost:3000', 'http://127.0.0.1:4040');
    api.ready(
      { ...info, name: 'b', url: 'http://b.l/', urls: ['http://b.l/'] },
      'x',
      'http://127.0.0.1:4041',
    );
    vi.advanceTimersByTime(250);
    // Each header row is drawn after a cursor move and an erase (ESC [ row;1H ESC [2K).
    const rowStart = new RegExp(`${String.fromCharCode(27)}\\[\\d+;1H${String.fromCharCode(27)}\\[2K`);
    const rows = (frames().at(-1) ?? '').split(rowStart).slice(2, 6);
    expect(rows).toEqual([
      '  web  http://app.localhost:8080/ -> http://localhost:3000',
      '       inspector http://127.0.0.1:4040',
      '  api  http://b.l/ -> x',
      '       inspector http://127.0.0.1:4041',
    ]);
  });

  it("a file's tunnel row follows its live replica count (tunnel2 start), not only the session's own", () => {
    const { view, frames } = screen();
    const web = view.tunnel('web', 'requests');
    web.ready({ ...info, url: 'http://a.l/', urls: ['http://a.l/'], replicas: 1 }, 'x');
    vi.advanceTimersByTime(250);
    expect(frames().at(-1)).toContain('replicas 1');
    web.replicas?.(3);
    vi.advanceTimersByTime(250);
    expect(frames().at(-1)).toContain('replicas 3');
  });

  it('a refusal before any session stays a plain line, with no screen set up', () => {
    const { view, writes, errs } = screen();
    view.closed();
    expect(writes).toEqual([]);
    expect(errs).toEqual(['tunnel2: closed\n']);
  });
});
