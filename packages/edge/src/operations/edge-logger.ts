import { isatty } from 'node:tty';
import { type DestinationStream, type Logger, pino } from 'pino';
import type { LogLevel } from '../settings/edge-config.js';
import { formatHumanLine } from './human-log-line.js';
import { createLogSink, type LogSink } from './log-sink.js';

/**
 * Paths pino censors wherever they appear in a log line: credentials in request headers (ours and
 * Fastify's serialisers use `req.headers`), and any field carrying a token or secret.
 */
export const redactedPaths = [
  'authorization',
  'headers.authorization',
  'headers["proxy-authorization"]',
  'headers.cookie',
  'req.headers.authorization',
  'req.headers["proxy-authorization"]',
  'req.headers.cookie',
  'token',
  'tokens',
  'tokenSecret',
  'secret',
  '*.authorization',
  '*.token',
  '*.tokens',
  '*.tokenSecret',
  '*.secret',
];

export type LogFormat = 'auto' | 'json' | 'pretty';

export interface EdgeLoggerOptions {
  level: LogLevel;
  /** `pretty`: human lines; `json`: one JSON object per line; `auto`: human when stdout and stderr are terminals. */
  format: LogFormat;
  /** Where JSON lines go instead of stderr; tests pass a stream to read them (the format is then JSON). */
  destination?: DestinationStream;
  /** The file descriptor written to; default 2 (stderr). */
  fd?: number;
  /** For NO_COLOR / FORCE_COLOR / TERM; default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Whether stdout and the log's descriptor are terminals; default: asked of the system. */
  terminals?: { stdout: boolean; log: boolean };
}

/**
 * Human lines when asked for, or (`auto`) when a person is watching: stdout and stderr both terminals. A
 * redirected stdout or stderr (`| jq`, `2> edge.log`, a container's log driver, systemd) means a program
 * reads the log, and gets JSON.
 */
export function humanLogWanted(format: LogFormat, terminals: { stdout: boolean; log: boolean }): boolean {
  if (format === 'auto') return terminals.stdout && terminals.log;
  return format === 'pretty';
}

/**
 * Colours only on a terminal, as the conventions say: NO_COLOR (any value) turns them off, FORCE_COLOR
 * (other than 0/false) on even without a terminal, TERM=dumb off.
 */
export function colourWanted(env: NodeJS.ProcessEnv, terminal: boolean): boolean {
  const force = env.FORCE_COLOR;
  if (force !== undefined && force !== '') return force !== '0' && force !== 'false';
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  return terminal && env.TERM !== 'dumb';
}

const levelValues: Record<LogLevel, number> = {
  fatal: 60,
  error: 50,
  warn: 40,
  info: 30,
  debug: 20,
  trace: 10,
  silent: Number.POSITIVE_INFINITY,
};

/** The edge's pino logger: redacted, ISO times, human lines or JSON on stderr through a bounded sink. */
export function createEdgeLogger(options: EdgeLoggerOptions): Logger {
  const base = {
    level: options.level,
    redact: { paths: redactedPaths, censor: '<redacted>' },
    // An ISO time is what log shippers parse without configuration.
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (options.destination !== undefined) return pino(base, options.destination);
  const fd = options.fd ?? 2;
  const env = options.env ?? process.env;
  const terminals = options.terminals ?? { stdout: isatty(1), log: isatty(fd) };
  if (!humanLogWanted(options.format, terminals)) {
    const sink = createLogSink({ fd, droppedLine: droppedJsonLine });
    return pino(base, sinkDestination(sink));
  }
  const style = {
    colour: colourWanted(env, terminals.log),
    stacks: levelValues[options.level] <= levelValues.debug,
  };
  const sink = createLogSink({
    fd,
    droppedLine: (count) =>
      formatHumanLine(
        { level: 40, time: Date.now(), msg: 'log lines dropped', dropped: count, why: STALLED },
        style,
      ),
  });
  return pino(base, {
    write(json: string) {
      let record: unknown;
      try {
        record = JSON.parse(json);
      } catch {
        sink.write(json);
        return;
      }
      sink.write(formatHumanLine(record as Record<string, unknown>, style));
    },
    flush: (done?: (err?: Error) => void) => sink.flush(done),
  } as DestinationStream);
}

const STALLED = 'stderr was not keeping up';

function droppedJsonLine(count: number): string {
  return `${JSON.stringify({ level: 40, time: new Date().toISOString(), pid: process.pid, msg: 'log lines dropped', dropped: count, why: STALLED })}\n`;
}

function sinkDestination(sink: LogSink): DestinationStream {
  return {
    write: (line: string) => sink.write(line),
    flush: (done?: (err?: Error) => void) => sink.flush(done),
  } as DestinationStream;
}
