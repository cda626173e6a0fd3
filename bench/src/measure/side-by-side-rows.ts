import { meterProcess, readStatusKb } from './process-stats.js';
import { perRequestUs } from './side-report.js';

/*
 * The row model `pnpm bench h2`, `grpc` and `tls` share: each measures one load against several stacks
 * (a protocol, direct or through the tunnel, or TLS terminated by the edge or by HAProxy) and compares them
 * row by row, with the targets computed as ratios of two rows measured in the same run.
 */

export type RowMode = 'rate' | 'closed' | 'stream';

/** Latency of a row's answers, ms; null where the load generator does not report that figure (h2load: no percentiles). */
export interface RowLatency {
  p50: number | null;
  p99: number | null;
  mean: number | null;
  max: number | null;
}

/** Resident set of one process sampled through a row, MiB. */
export interface RssSamples {
  firstMb: number;
  lastMb: number;
  maxMb: number;
  samples: number;
}

/** What one load run produced, before the processes' CPU is attached. */
export interface RowLoad {
  durationSec: number;
  /** Requests (or calls, or stream messages) finished, answered or failed. */
  requests: number;
  ok: number;
  /** Failures by kind: `http_<status>`, `grpc_<code>`, `reset`, `timeout`, ... */
  errors: Record<string, number>;
  latencyMs: RowLatency;
  /** Payload bytes moved (stream rows: echoed bytes received back); null where not counted. */
  bytes: number | null;
  /** Fixed-rate rows: sends skipped because no connection or stream was free (the rate was not kept); null elsewhere. */
  missedSlots: number | null;
}

/** One measured row: a protocol, a side, one load. */
export interface SideBySideRow {
  /** What the row measures, e.g. "h2 tunnel" or "https haproxy + edge". */
  label: string;
  protocol: string;
  side: string;
  mode: RowMode;
  /** Fixed-rate rows: the target rate; null for closed loop and streams. */
  targetRps: number | null;
  connections: number;
  /** Concurrent streams per connection in a closed loop over h2; null where one request at a time. */
  streams: number | null;
  /** The load generator: autocannon, h2load, node:http2, grpc-js. */
  generator: string;
  durationSec: number;
  requests: number;
  ok: number;
  errors: Record<string, number>;
  /** Answered requests per second (ok / duration). */
  rps: number;
  latencyMs: RowLatency;
  /** Payload bytes per second (stream rows); null elsewhere. */
  bytesPerSec: number | null;
  /** Fixed-rate rows: sends skipped because no connection or stream was free; null where not counted. */
  missedSlots: number | null;
  /** CPU (user + system) per ok request of each process that ran, µs; 10 ms clock ticks. */
  cpuPerRequestUs: Record<string, number | null>;
  /** Sum over the processes between the client and the backend (edge, agent, HAProxy); null for direct rows. */
  betweenCpuPerRequestUs: number | null;
  /** RSS of each process sampled every 250 ms through the row (stream rows); null elsewhere. */
  rss: Record<string, RssSamples> | null;
  /** Why the row was not measured (a capability the edge or agent lacks); null when measured. */
  unavailable: string | null;
}

/** One target of the issue, computed from two rows. `met` is null when a row it needs was not measured. */
export interface SideBySideTarget {
  name: string;
  /** The limit, as the issue states it. */
  limit: string;
  measured: number | null;
  /** The measured figure as text, with its unit or × ("–" when not measured). */
  text: string;
  met: boolean | null;
  /** Why the target could not be measured; null otherwise. */
  unavailable: string | null;
}

export interface SideBySideResult<S> {
  scenario: 'h2' | 'grpc' | 'tls';
  settings: S;
  /** Addresses of what ran (backend, edge, tunnel URLs), for the report's header. */
  stack: Record<string, string | null>;
  rows: SideBySideRow[];
  targets: SideBySideTarget[];
}

/** The identity of a row, without its figures. */
export type RowSpec = Pick<
  SideBySideRow,
  'label' | 'protocol' | 'side' | 'mode' | 'targetRps' | 'connections' | 'streams' | 'generator'
>;

/** A process whose CPU (and for streams, RSS) a row measures; `between` ones add up to the tunnel's cost. */
export interface MeteredProcess {
  name: string;
  pid: number;
  between: boolean;
}

const RSS_INTERVAL_MS = 250;

function sampleRss(processes: readonly MeteredProcess[]): { stop(): Record<string, RssSamples> } {
  const traces = new Map<string, RssSamples>();
  const sample = (): void => {
    for (const p of processes) {
      const kb = readStatusKb(p.pid, 'VmRSS');
      if (kb === undefined) continue;
      const mb = kb / 1024;
      const trace = traces.get(p.name);
      if (trace === undefined) traces.set(p.name, { firstMb: mb, lastMb: mb, maxMb: mb, samples: 1 });
      else {
        trace.lastMb = mb;
        trace.maxMb = Math.max(trace.maxMb, mb);
        trace.samples += 1;
      }
    }
  };
  sample();
  const timer = setInterval(sample, RSS_INTERVAL_MS);
  return {
    stop() {
      clearInterval(timer);
      sample();
      return Object.fromEntries(traces);
    },
  };
}

/** Runs `load` while metering `processes`, and makes the row. */
export async function measureRow(
  spec: RowSpec,
  processes: readonly MeteredProcess[],
  load: () => Promise<RowLoad>,
): Promise<SideBySideRow> {
  const meters = processes.map((p) => ({ p, meter: meterProcess(p.pid) }));
  const rss = spec.mode === 'stream' ? sampleRss(processes) : undefined;
  const result = await load();
  const traces = rss?.stop() ?? null;
  const cpu: Record<string, number | null> = {};
  let between = 0;
  let betweenKnown = true;
  let anyBetween = false;
  for (const { p, meter } of meters) {
    const perRequest = perRequestUs(meter.stop()?.cpuMs, result.ok);
    cpu[p.name] = perRequest;
    if (!p.between) continue;
    anyBetween = true;
    if (perRequest === null) betweenKnown = false;
    else between += perRequest;
  }
  const durationSec = result.durationSec;
  return {
    ...spec,
    durationSec,
    requests: result.requests,
    ok: result.ok,
    errors: result.errors,
    rps: durationSec > 0 ? result.ok / durationSec : 0,
    latencyMs: result.latencyMs,
    bytesPerSec: result.bytes === null || durationSec <= 0 ? null : result.bytes / durationSec,
    missedSlots: result.missedSlots,
    cpuPerRequestUs: cpu,
    betweenCpuPerRequestUs: anyBetween && betweenKnown ? Math.round(between * 10) / 10 : null,
    rss: traces,
    unavailable: null,
  };
}

/** A row that could not run: its reason, no figures. */
export function unavailableRow(spec: RowSpec, why: string): SideBySideRow {
  return {
    ...spec,
    durationSec: 0,
    requests: 0,
    ok: 0,
    errors: {},
    rps: 0,
    latencyMs: { p50: null, p99: null, mean: null, max: null },
    bytesPerSec: null,
    missedSlots: null,
    cpuPerRequestUs: {},
    betweenCpuPerRequestUs: null,
    rss: null,
    unavailable: why,
  };
}

export function errorTotal(row: SideBySideRow): number {
  return Object.values(row.errors).reduce((sum, n) => sum + n, 0);
}

/**
 * A target `a / b` against `limit` (at most, or at least): met when both rows were measured and the ratio
 * is within it; not measured (met null) with the first missing row's reason otherwise.
 */
export function ratioTarget(
  name: string,
  limitText: string,
  a: { row: SideBySideRow | undefined; value: (row: SideBySideRow) => number | null },
  b: { row: SideBySideRow | undefined; value: (row: SideBySideRow) => number | null },
  check: (ratio: number) => boolean,
): SideBySideTarget {
  const missing = [a.row, b.row].find((row) => row === undefined || row.unavailable !== null);
  if (missing !== undefined) {
    return {
      name,
      limit: limitText,
      measured: null,
      text: '–',
      met: null,
      unavailable: missing?.unavailable ?? 'a row it compares did not run',
    };
  }
  const top = a.value(a.row!);
  const bottom = b.value(b.row!);
  const measured = top !== null && bottom !== null && bottom > 0 ? top / bottom : null;
  return {
    name,
    limit: limitText,
    measured,
    text: measured === null ? '–' : `${measured.toFixed(2)}×`,
    met: measured === null ? false : check(measured),
    unavailable: null,
  };
}

/** The gate of these scenarios: any failed request, or a measured target missed. Unmeasured targets do not gate. */
export function sideBySideGate(result: SideBySideResult<unknown>): { passed: boolean; violations: string[] } {
  const violations: string[] = [];
  for (const row of result.rows) {
    const failed = errorTotal(row);
    if (row.unavailable === null && failed > 0) {
      violations.push(`${row.label} (${rowLoadText(row)}): ${failed} of ${row.requests} failed`);
    }
  }
  for (const t of result.targets) {
    if (t.met === false) violations.push(`${t.name}: ${t.text}, target ${t.limit}`);
  }
  return { passed: violations.length === 0, violations };
}

/** "500 RPS", "closed loop, 10 × 10 streams", "stream". */
export function rowLoadText(
  row: Pick<SideBySideRow, 'mode' | 'targetRps' | 'connections' | 'streams'>,
): string {
  if (row.mode === 'rate') return `${row.targetRps} RPS`;
  if (row.mode === 'stream') return 'stream';
  return row.streams === null
    ? `closed loop, ${row.connections} connections`
    : `closed loop, ${row.connections} × ${row.streams} streams`;
}
