import { type ClientHttp2Session, connect, constants } from 'node:http2';
import { createLatencyRecorder } from './latency-recorder.js';
import type { RowLoad } from './side-by-side-rows.js';

/*
 * A fixed request rate over HTTP/2 with prior knowledge (h2c), for `pnpm bench h2`. Debian's h2load 1.52
 * has no per-request rate (`-r` is connections per second; `--rps` came later), so its closed loop is the
 * only thing it measures here; this client sends request k at start + k/R over `connections` sessions in
 * turn, each request its own stream, so a slow answer never delays the next send (open loop: nothing to
 * correct for coordinated omission, as long as a session has a free stream).
 */

export interface H2PacedSpec {
  /** http://host:port of an h2c server (the edge's plain port, the h2c backend), or https:// for h2 over TLS. */
  origin: string;
  /** :authority of every request (the tunnel routes by it). */
  authority: string;
  path: string;
  connections: number;
  /** Concurrent streams a session may have open; a send due when all are busy is skipped and counted. */
  maxStreamsPerConnection: number;
  ratePerSec: number;
  durationSec: number;
  timeoutSec: number;
}

export interface H2PacedLoad extends RowLoad {
  /** Sends skipped because every stream of the session was busy. */
  missedSlots: number;
}

function openSession(origin: string): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    // https:// (h2 by ALPN): the kit's test certificate is not checked, as the load generator checks none.
    const session = connect(origin, { rejectUnauthorized: false });
    session.once('connect', () => {
      session.off('error', reject);
      // An error after connect ends that session's streams, which count it; it must not crash the bench.
      session.on('error', () => {});
      resolve(session);
    });
    session.once('error', reject);
  });
}

/** Runs one fixed-rate stage; the sessions are opened first and closed at the end. */
export async function runH2Paced(spec: H2PacedSpec): Promise<H2PacedLoad> {
  const sessions = await Promise.all(
    Array.from({ length: spec.connections }, () => openSession(spec.origin)),
  );
  const inFlight = new Array<number>(spec.connections).fill(0);
  const latency = createLatencyRecorder(undefined);
  const errors: Record<string, number> = {};
  const fail = (kind: string): void => {
    errors[kind] = (errors[kind] ?? 0) + 1;
  };
  let requests = 0;
  let ok = 0;
  let bytes = 0;
  let missedSlots = 0;
  let pending = 0;
  let allDone: (() => void) | undefined;

  const send = (slot: number): void => {
    const i = slot % spec.connections;
    const session = sessions[i]!;
    if (inFlight[i]! >= spec.maxStreamsPerConnection || session.closed || session.destroyed) {
      missedSlots += 1;
      return;
    }
    inFlight[i]! += 1;
    pending += 1;
    const sentAt = performance.now();
    let status = 0;
    let settled = false;
    const stream = session.request({ ':method': 'GET', ':path': spec.path, ':authority': spec.authority });
    const timer = setTimeout(() => {
      finish('timeout');
      stream.close(constants.NGHTTP2_CANCEL);
    }, spec.timeoutSec * 1000);
    const finish = (outcome: 'ok' | string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      inFlight[i]! -= 1;
      pending -= 1;
      requests += 1;
      if (outcome === 'ok') {
        ok += 1;
        latency.record(performance.now() - sentAt);
      } else fail(outcome);
      if (pending === 0) allDone?.();
    };
    stream.on('response', (headers) => {
      status = Number(headers[':status']);
    });
    stream.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    stream.on('end', () => finish(status >= 200 && status < 300 ? 'ok' : `http_${status}`));
    stream.on('error', () => finish('reset'));
    stream.on('close', () => finish(status === 0 ? 'reset' : `http_${status}`));
    stream.end();
  };

  const startAt = performance.now();
  const total = Math.floor(spec.ratePerSec * spec.durationSec);
  let next = 0;
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const due = Math.min(total, Math.floor(((performance.now() - startAt) / 1000) * spec.ratePerSec) + 1);
      while (next < due) send(next++);
      if (next >= total) {
        resolve();
        return;
      }
      const wait = startAt + (next * 1000) / spec.ratePerSec - performance.now();
      setTimeout(tick, Math.max(0, wait));
    };
    tick();
  });
  if (pending > 0) await new Promise<void>((resolve) => (allDone = resolve));
  const durationSec = (performance.now() - startAt) / 1000;
  await Promise.all(
    sessions.map((s) => new Promise<void>((resolve) => (s.closed ? resolve() : s.close(() => resolve())))),
  );
  const raw = latency.raw();
  latency.destroy();
  return {
    durationSec,
    requests,
    ok,
    errors,
    latencyMs: ok === 0 ? { p50: null, p99: null, mean: null, max: null } : raw,
    bytes,
    missedSlots,
  };
}

/** One h2c GET: the status, or the error that prevented one (the edge answering the preface with HTTP/1.1 505). */
export async function probeH2c(origin: string, authority: string, path: string): Promise<number> {
  const session = await openSession(origin);
  try {
    return await new Promise<number>((resolve, reject) => {
      const stream = session.request({ ':method': 'GET', ':path': path, ':authority': authority });
      const timer = setTimeout(() => stream.close(constants.NGHTTP2_CANCEL), 5_000);
      let status = 0;
      stream.on('response', (headers) => {
        status = Number(headers[':status']);
      });
      stream.resume();
      stream.on('error', reject);
      stream.on('close', () => {
        clearTimeout(timer);
        if (status === 0) reject(new Error('no HTTP/2 answer'));
        else resolve(status);
      });
      stream.end();
    });
  } finally {
    session.destroy();
  }
}
