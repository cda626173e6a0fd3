import { Writable } from 'node:stream';
import { type PeerCertificate, connect as tlsConnect } from 'node:tls';
import { type Logger, pino } from 'pino';

/*
 * Helpers for the tests of TLS at the edge: a logger whose lines a test can wait for (a reload is an event
 * in the log, not something to poll for), and a handshake that reports the certificate served for an SNI.
 */

export interface WatchedLog {
  logger: Logger;
  lines: Record<string, unknown>[];
  /** Resolves with the first line (past or future) whose `msg` starts with `prefix`, counted from `from`. */
  waitFor(prefix: string, from?: number): Promise<Record<string, unknown>>;
}

export function watchedLog(level = 'info'): WatchedLog {
  const lines: Record<string, unknown>[] = [];
  const waiters: { prefix: string; from: number; resolve: (line: Record<string, unknown>) => void }[] = [];
  const find = (prefix: string, from: number): Record<string, unknown> | undefined =>
    lines.slice(from).find((line) => String(line.msg).startsWith(prefix));
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const text of chunk.toString().split('\n')) {
        if (text === '') continue;
        lines.push(JSON.parse(text) as Record<string, unknown>);
      }
      for (const waiter of [...waiters]) {
        const line = find(waiter.prefix, waiter.from);
        if (line !== undefined) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(line);
        }
      }
      done();
    },
  });
  return {
    logger: pino({ level }, sink),
    lines,
    waitFor(prefix, from = 0) {
      const line = find(prefix, from);
      if (line !== undefined) return Promise.resolve(line);
      return new Promise((resolve) => waiters.push({ prefix, from, resolve }));
    },
  };
}

/** Completes a TLS handshake with `servername` (none: no SNI) and returns the certificate the port served. */
export function servedCertificate(
  port: number,
  ca: string,
  servername: string | undefined,
): Promise<PeerCertificate> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({
      host: '127.0.0.1',
      port,
      ca,
      // Whatever name is served: the test reads the certificate rather than rely on the check.
      rejectUnauthorized: false,
      ...(servername === undefined ? {} : { servername }),
    });
    socket.once('secureConnect', () => {
      const cert = socket.getPeerCertificate();
      socket.destroy();
      resolve(cert);
    });
    socket.once('error', reject);
  });
}
