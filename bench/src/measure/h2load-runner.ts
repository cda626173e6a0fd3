import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { BenchError, BenchErrorCode } from '../errors.js';
import type { RowLoad } from './side-by-side-rows.js';

/*
 * h2load (Debian's nghttp2-client) in a closed loop: `-c` connections × `-m` concurrent streams each, for
 * `-D` seconds, HTTP/2 with prior knowledge on an http:// URI. Its own process, so its CPU is not the
 * bench's; it reports no latency percentiles, only min / max / mean of "time for request", which are what
 * its rows carry.
 */

export interface H2loadSpec {
  url: string;
  authority: string;
  connections: number;
  streams: number;
  durationSec: number;
  /** Seconds of load before the measured duration, discarded by h2load itself. */
  warmupSec: number;
}

const CANDIDATES = ['/usr/bin/h2load', '/usr/local/bin/h2load'];

/** The h2load binary, or the error that names the Debian package the bench needs. */
export function findH2load(): string {
  const onPath = (process.env.PATH ?? '').split(delimiter).map((dir) => join(dir, 'h2load'));
  const found = [...onPath, ...CANDIDATES].find((path) => path !== 'h2load' && existsSync(path));
  if (found === undefined) {
    throw new BenchError(
      BenchErrorCode.PREFLIGHT,
      "h2load is not installed: `pnpm bench h2` runs Debian's (apt-get install -y nghttp2-client)",
    );
  }
  return found;
}

/** "123.45us", "1.2ms", "3s" → ms. */
function durationMs(text: string): number | null {
  const match = /^([\d.]+)(us|ms|s)$/.exec(text);
  if (match === null) return null;
  const value = Number(match[1]);
  return match[2] === 'us' ? value / 1000 : match[2] === 'ms' ? value : value * 1000;
}

/** The figures of h2load's summary; throws when a line it must print is missing. */
export function parseH2loadOutput(text: string): RowLoad {
  const finished = /finished in ([\d.]+(?:us|ms|s)),/.exec(text);
  const requests =
    /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(
      text,
    );
  const codes = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(text);
  const traffic = /\((\d+)\) data/.exec(text);
  const timing = /time for request:\s+(\S+)\s+(\S+)\s+(\S+)/.exec(text);
  const elapsedMs = finished === null ? null : durationMs(finished[1]!);
  if (elapsedMs === null || requests === null || codes === null) {
    throw new BenchError(BenchErrorCode.LOAD_GENERATOR, `h2load printed no summary: ${text.slice(-400)}`);
  }
  // h2load: "errored" is the subset of "failed" that got no HTTP answer (reset, closed), "timeout" a subset of it.
  const [done, succeeded, errored, timeout] = [3, 4, 6, 7].map((i) => Number(requests[i]));
  const [c2, c3, c4, c5] = [1, 2, 3, 4].map((i) => Number(codes[i]));
  // Status codes are counted when a head arrives, "done" when the stream ends: a stream cut by the end of
  // -D may have its 2xx counted but not be done. An answer is one that completed.
  const ok = Math.min(c2 ?? 0, (succeeded ?? 0) - (c3 ?? 0));
  const errors: Record<string, number> = {};
  const add = (kind: string, n: number | undefined): void => {
    if (n !== undefined && n > 0) errors[kind] = n;
  };
  add('http_3xx', c3);
  add('http_4xx', c4);
  add('http_5xx', c5);
  add('timeout', timeout);
  add('reset', (errored ?? 0) - (timeout ?? 0));
  return {
    durationSec: elapsedMs / 1000,
    requests: done ?? 0,
    ok,
    errors,
    latencyMs: {
      p50: null,
      p99: null,
      mean: timing === null ? null : durationMs(timing[3]!),
      max: timing === null ? null : durationMs(timing[2]!),
    },
    bytes: traffic === null ? null : Number(traffic[1]),
    missedSlots: null,
  };
}

/** Runs h2load to its end; resolves with its figures, rejects when it fails to run. */
export function runH2load(spec: H2loadSpec): Promise<RowLoad> {
  const bin = findH2load();
  const args = [
    '-c',
    String(spec.connections),
    '-m',
    String(spec.streams),
    '-D',
    String(spec.durationSec),
    ...(spec.warmupSec > 0 ? [`--warm-up-time=${spec.warmupSec}`] : []),
    '-H',
    `:authority: ${spec.authority}`,
    spec.url,
  ];
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
    });
    child.once('error', reject);
    child.once('exit', () => {
      try {
        resolve(parseH2loadOutput(out));
      } catch (err) {
        reject(err);
      }
    });
  });
}
