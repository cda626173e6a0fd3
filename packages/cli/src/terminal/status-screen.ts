import type { SessionStats } from '../session/agent-session.js';
import { finishingText } from './in-flight-text.js';
import type { LineOutput } from './line-writer.js';
import { createLogTail } from './log-tail.js';
import { RateWindow } from './rate-window.js';
import {
  connectionLine,
  createHumanReporter,
  type Reporter,
  reconnectLine,
  requestLine,
  targetWithProtocol,
} from './reporter.js';
import {
  type ActivityUnit,
  renderStatus,
  type SessionState,
  styleStatus,
  type TunnelRow,
} from './status-view.js';
import type { Terminal } from './terminal.js';

export interface StatusScreenOptions {
  /** stdout: header frames go out with `write`, request lines with `writeBatched`. */
  out: LineOutput;
  /** stderr: reconnects, errors and the closing line, as in the plain log. */
  err: (line: string) => void;
  terminal: Terminal;
  colour: boolean;
  /** Default: performance.now. */
  now?: () => number;
  /** Shortest time between two redraws while something changes (default 250 ms). */
  refreshMs?: number;
  /** Redraws while nothing happens, for the round trip the heartbeat measures (default 5 s). */
  idleRefreshMs?: number;
}

/** What the screen reads the live figures from: a Tunnel. */
export interface StatsSource {
  readonly sessionStats: SessionStats | undefined;
}

export interface StatusScreen extends Reporter {
  /** The tunnel whose session figures the header shows; `tcp` counts connections instead of requests. */
  watch(source: StatsSource, unit: ActivityUnit): void;
  /**
   * A reporter for one tunnel of a session carrying several (`tunnel2 start`): its row leads with `label`,
   * its lines are prefixed by it, and it counts in `unit` beside the others of the same kind.
   */
  tunnel(label: string, unit: ActivityUnit): Reporter;
  /** The header is on screen and the terminal not yet given back (closed() gives it back). */
  readonly active: boolean;
}

/** The row key of the session's own tunnel (`http`, `tcp`): no config-file label can equal it. */
const OWN_TUNNEL = Symbol('own tunnel');

/** The header lists requests before connections, whichever tunnel came up first. */
const UNIT_ORDER: readonly ActivityUnit[] = ['requests', 'connections'];

const ESC = '\x1b[';
const HIDE_CURSOR = `${ESC}?25l`;
const SHOW_CURSOR = `${ESC}?25h`;
const SAVE_CURSOR = '\x1b7';
const RESTORE_CURSOR = '\x1b8';

/**
 * The terminal as the shell had it: no scroll region (resetting it homes the cursor, hence the save and
 * restore), default colours (when the view used any: NO_COLOR means no SGR at all), the cursor shown.
 * Written last, whatever the view wrote before.
 */
export function terminalReset(colour: boolean): string {
  return `${SAVE_CURSOR}${ESC}r${RESTORE_CURSOR}${colour ? `${ESC}0m` : ''}${SHOW_CURSOR}`;
}

/**
 * The terminal view: a status header on the top rows, and the request lines scrolling below it inside a
 * scroll region (DECSTBM), so the header never moves and is redrawn in place. Each redraw is one write (the
 * cursor hidden, saved, moved, restored), at most once per `refreshMs` and only when its text changed.
 * A request costs a counter, a bucket increment and its line: the header is drawn by the timer.
 */
export function createStatusScreen(options: StatusScreenOptions): StatusScreen {
  const { out, err, terminal, colour } = options;
  const tail = createLogTail();
  // The stderr lines (reconnects, errors, hints, the closing line) are the plain log's own.
  /** A line of the log on stderr: kept for a resize to draw again. */
  const logErr = (line: string): void => {
    tail.add(line);
    err(line);
  };
  const plain = createHumanReporter(out, logErr);
  /** A ready was shown: a retry is then a lost connection, not a first connect still trying. */
  let connectedOnce = false;
  /** A line of the log below the header, now. */
  const say = (line: string): void => {
    tail.add(line);
    out.write(line);
  };
  const refreshMs = options.refreshMs ?? 250;
  const idleRefreshMs = options.idleRefreshMs ?? 5_000;
  const counters = new Map<ActivityUnit, { total: number; rate: RateWindow }>();
  const counter = (unit: ActivityUnit) => {
    let c = counters.get(unit);
    if (c === undefined) {
      c = { total: 0, rate: new RateWindow(options.now) };
      counters.set(unit, c);
    }
    return c;
  };
  /**
   * The rows in the order their tunnels came up, keyed by config-file label, or OWN_TUNNEL for the session's
   * own tunnel: not by name, which changes when a random name taken while away is replaced.
   */
  const tunnels = new Map<string | typeof OWN_TUNNEL, TunnelRow>();
  let state: SessionState = { kind: 'connecting' };
  let source: StatsSource | undefined;
  /** The unit of the session's own tunnel (`watch`): what the screen's own request/connection count in. */
  let unit: ActivityUnit = 'requests';
  /** Header rows as last laid out; 0 until the screen is set up. */
  let height = 0;
  let layoutRows = 0;
  let drawn = '';
  let relayout = false;
  let timer: NodeJS.Timeout | undefined;
  let timerDelay = 0;
  let stopResize: (() => void) | undefined;
  let finished = false;

  const lines = (): string[] => {
    const stats = source?.sessionStats;
    const shown: SessionState =
      state.kind === 'online' && stats?.draining
        ? { kind: 'draining' }
        : state.kind === 'finishing'
          ? { ...state, open: stats?.openStreams ?? 0 }
          : state;
    const { columns, rows } = terminal.size();
    const all = renderStatus(
      {
        tunnels: [...tunnels.values()],
        state: shown,
        rttMs: stats?.rttMs ?? 0,
        activity: UNIT_ORDER.flatMap((u) => {
          const c = counters.get(u);
          return c === undefined ? [] : [{ unit: u, total: c.total, perMinute: c.rate.perMinute() }];
        }),
        open: stats?.openStreams ?? 0,
      },
      columns,
      colour,
    );
    // At least one row stays for the request lines, however small the window.
    return all.slice(0, Math.max(rows - 1, 1));
  };

  /** The header as one write; with `layout`, the screen is set up first (start, resize, a new tunnel row). */
  const frame = (header: string[], layout: boolean): string => {
    const { rows } = terminal.size();
    let text = HIDE_CURSOR;
    if (layout) {
      // First time: newlines push what the screen showed into the scrollback instead of erasing it. Later
      // (a resize, a new tunnel row) the screen is cleared and the latest log lines drawn again below the
      // header, leaving the last row for the cursor.
      const again = height !== 0;
      text += again ? `${ESC}2J` : '\n'.repeat(rows);
      text += `${ESC}${header.length + 1};${rows}r${ESC}${header.length + 1};1H`;
      if (again) text += tail.last(rows - header.length - 1, terminal.size().columns);
      height = header.length;
      layoutRows = rows;
    }
    text += SAVE_CURSOR;
    header.forEach((line, i) => {
      text += `${ESC}${i + 1};1H${ESC}2K${line}`;
    });
    return `${text}${RESTORE_CURSOR}${SHOW_CURSOR}`;
  };

  const draw = (): void => {
    if (finished) return;
    const header = lines();
    const layout =
      height === 0 || relayout || header.length !== height || terminal.size().rows !== layoutRows;
    const text = header.join('\n');
    if (!layout && text === drawn) return;
    relayout = false;
    drawn = text;
    // Lines still batched go out first: drawn again after the clear, they must not come a second time.
    if (layout && height !== 0) out.flush();
    out.write(frame(header, layout));
  };

  const busy = (): boolean =>
    state.kind !== 'online' ||
    (source?.sessionStats?.openStreams ?? 0) > 0 ||
    [...counters.values()].some((c) => c.rate.perMinute() > 0);

  const tick = (): void => {
    timer = undefined;
    draw();
    schedule(busy() ? refreshMs : idleRefreshMs);
  };

  /** The next redraw in `delayMs`, unless one comes sooner. Unref'd: the header keeps nothing alive. */
  const schedule = (delayMs = refreshMs): void => {
    if (finished || height === 0) return;
    if (timer !== undefined) {
      // An event while idle: the slow refresh gives way to a prompt one; otherwise the pending one stands.
      if (timerDelay <= delayMs) return;
      clearTimeout(timer);
    }
    timerDelay = delayMs;
    timer = setTimeout(tick, delayMs);
    timer.unref();
  };

  /** The header appears with the first event worth showing (not before a first refusal that ends it all). */
  const start = (): void => {
    if (height !== 0 || finished) return;
    stopResize = terminal.onResize(() => {
      relayout = true;
      schedule();
    });
    draw();
    // What went before it (a stderr line) must not land under the scroll region's setup.
    out.flush();
    schedule();
  };

  /** A tunnel came up (`key`: its row); a reconnect says so in the log. */
  const ready = (row: TunnelRow, key: string | typeof OWN_TUNNEL, prefix: string): void => {
    const before = tunnels.get(key);
    tunnels.set(key, row);
    if (before !== undefined) {
      say(
        prefix +
          (row.url === before.url
            ? `reconnected: ${row.url}\n`
            : `reconnected at a new address: ${row.url} (the previous one was taken)\n`),
      );
    }
    state = { kind: 'online' };
    connectedOnce = true;
    if (height === 0) start();
    else schedule();
  };

  /** A replica's live count changed (the edge's NOTICE): its row shows it at the next draw. */
  const replicas = (key: string | typeof OWN_TUNNEL, n: number): void => {
    const row = tunnels.get(key);
    if (row === undefined) return;
    tunnels.set(key, { ...row, replicas: n });
    if (height > 0) schedule();
  };

  const count = (u: ActivityUnit, line: string): void => {
    // The closing line is the last: a request or connection cut by the close may report after it.
    if (finished) return;
    const c = counter(u);
    c.total++;
    c.rate.hit();
    tail.add(line);
    out.writeBatched(line);
    schedule();
  };

  const requestText = (r: Parameters<Reporter['request']>[0]): string =>
    requestLine(r, colour ? styleStatus : undefined);

  const screen: StatusScreen = {
    watch(s, u) {
      source = s;
      unit = u;
      counter(u);
    },
    tunnel(label, u) {
      counter(u);
      const prefix = `${label}  `;
      return {
        ...screen,
        ready: (info, target, inspectorUrl, backendProtocol) =>
          ready(
            {
              name: info.name,
              label,
              url: info.url,
              urls: info.urls,
              target: targetWithProtocol(target, backendProtocol),
              inspectorUrl,
              replicas: info.replicas,
            },
            label,
            prefix,
          ),
        replicas: (n) => replicas(label, n),
        request: (r) => count(u, prefix + requestText(r)),
        connection: (c) => count(u, prefix + connectionLine(c)),
      };
    },
    ready(info, target, inspectorUrl, backendProtocol) {
      ready(
        {
          name: info.name,
          url: info.url,
          urls: info.urls,
          target: targetWithProtocol(target, backendProtocol),
          inspectorUrl,
          replicas: info.replicas,
        },
        OWN_TUNNEL,
        '',
      );
    },
    request(r) {
      count(unit, requestText(r));
    },
    replicas: (n) => replicas(OWN_TUNNEL, n),
    connection(c) {
      count(unit, connectionLine(c));
    },
    reconnecting(e) {
      state = { kind: 'reconnecting', attempt: e.attempt };
      start();
      schedule();
      logErr(`${reconnectLine(e, connectedOnce)}\n`);
    },
    error: (e) => plain.error(e),
    hint(code, message) {
      // Under the header, with the attempt lines that follow it: written before the header takes the top
      // rows, it would scroll away with them.
      start();
      schedule();
      plain.hint(code, message);
    },
    finishing(count, u, signal) {
      state = { kind: 'finishing', open: count, unit: u, signal };
      say(`tunnel2: ${finishingText(count, u, signal)}\n`);
      // At once, with the line: the header is what the user looks at after Ctrl-C (once it is drawn).
      if (height === 0) return;
      draw();
      schedule();
    },
    closed(cut) {
      state = { kind: 'offline' };
      if (timer !== undefined) clearTimeout(timer);
      stopResize?.();
      if (height !== 0) {
        // The last header stays on screen, the terminal is the shell's again, and the shell continues
        // below the last log line.
        out.write(`${frame(lines(), false)}${terminalReset(colour)}`);
        out.flush();
      }
      finished = true;
      plain.closed(cut);
    },
    get active() {
      return height !== 0 && !finished;
    },
  };
  return screen;
}
