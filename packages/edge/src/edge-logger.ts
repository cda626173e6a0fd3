import { isatty } from 'node:tty';
import { type DestinationStream, type Logger, pino } from 'pino';
import type { LogLevel } from './edge-config.js';

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

export interface EdgeLoggerOptions {
  level: LogLevel;
  format: 'auto' | 'json' | 'pretty';
  /** Where JSON lines go; default stderr. Tests pass a stream to read them. */
  destination?: DestinationStream;
}

type PrettyFactory = (options: { destination: number; colorize: boolean }) => DestinationStream;

/**
 * pino-pretty is optional and never a dependency of the image: it is loaded only when pretty output is
 * asked for (or `auto` on a TTY) and installed; otherwise logs stay JSON, one object per line.
 */
async function loadPretty(): Promise<PrettyFactory | undefined> {
  const specifier: string = 'pino-pretty';
  try {
    const loaded = (await import(specifier)) as { default?: PrettyFactory };
    return typeof loaded.default === 'function' ? loaded.default : undefined;
  } catch {
    return undefined;
  }
}

export async function createEdgeLogger(options: EdgeLoggerOptions): Promise<Logger> {
  const base = {
    level: options.level,
    redact: { paths: redactedPaths, censor: '<redacted>' },
    // An ISO time is what log shippers parse without configuration.
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (options.destination !== undefined) return pino(base, options.destination);
  const wantsPretty = options.format === 'pretty' || (options.format === 'auto' && isatty(2));
  if (wantsPretty) {
    const pretty = await loadPretty();
    if (pretty !== undefined) return pino(base, pretty({ destination: 2, colorize: isatty(2) }));
    if (options.format === 'pretty') {
      const logger = pino(base, pino.destination(2));
      logger.warn('logFormat=pretty needs the pino-pretty package; logging JSON');
      return logger;
    }
  }
  return pino(base, pino.destination(2));
}
