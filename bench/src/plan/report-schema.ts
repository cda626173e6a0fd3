/**
 * The report.json contract (schemaVersion 1). bench/report.schema.json is the same contract as a JSON
 * Schema, and bench/README.md explains every field; a change that breaks a reader bumps schemaVersion.
 * Times are in milliseconds, rates in requests per second, memory in MiB.
 */

import type { PercentileKey } from './sample-sufficiency.js';
import type { MachineLoad, Verdict } from './verdict-schema.js';

export type * from './verdict-schema.js';

export const SCHEMA_VERSION = 1;

export type ScenarioName = 'ramp' | 'spike' | 'constant' | 'max';
export type SideName = 'direct' | 'tunnel';
/** The agent's request inspector during a run; `both` measures a second agent with it off beside it. */
export type InspectMode = 'on' | 'off' | 'both';

export interface BenchReport {
  schemaVersion: typeof SCHEMA_VERSION;
  scenario: ScenarioName;
  /** The command line that produced this report, to run it again. */
  command: string;
  startedAt: string;
  finishedAt: string;
  environment: Environment;
  settings: Settings;
  stages: StageReport[];
  /** Why the run stopped before its last stage (a process of the stack died); null when it ran to the end. */
  aborted: string | null;
  /** Totals of each side over all stages (null for a side that did not run). */
  totals: { direct: SideTotals | null; tunnel: SideTotals | null };
  gate: GateReport;
  /** The kit's reading: what saturated first and where, each side's knee, the tunnel's cost, warnings. Absent in older reports. */
  verdict?: Verdict;
}

export interface Environment {
  node: string;
  platform: string;
  arch: string;
  cpus: number;
  cpuModel: string;
  totalMemoryMb: number;
  /** Version of @tunnel2/cli under test. */
  tunnel2: string;
  /** autocannon version used as the load generator. */
  autocannon: string;
}

export interface Settings {
  /** Requested path, the same on both sides (the first of request.paths). */
  path: string;
  /** Seconds of discarded load before the first stage of each side (each stage's own: StageReport.warmupSec). */
  warmupSec: number;
  /** How the warm-up was chosen, e.g. "10 % of each stage, 1–10 s, before every stage". Absent in older reports. */
  warmupRule?: string;
  /** Request timeout in seconds. */
  timeoutSec: number;
  sides: SideName[];
  /** The direct side: the test backend, or --target; empty with --tunnel-url alone. */
  backendUrl: string;
  /** The tunnel's public URL (the kit's own agent, routed by Host to the edge on loopback, or --tunnel-url). */
  tunnelUrl: string | null;
  /** The agent's request inspector on the tunnel side (`both`: stages also carry tunnelInspectorOff). */
  inspect: InspectMode;
  /** --replicas: agents serving the tunnel's name, each with its own backend. Absent: one. */
  replicas?: number;
  /** --target: the user's service; null when the kit's test backend served. Absent in older reports. */
  targetUrl?: string | null;
  /** true when --tunnel-url named an existing tunnel: the kit started no edge or agent. Absent in older reports. */
  tunnelGiven?: boolean;
  /** What every request looked like. Absent in older reports (GET `path`, 2xx). */
  request?: RequestSettings;
}

export interface RequestSettings {
  method: string;
  /** Each connection cycles through these. */
  paths: string[];
  /** Extra headers; values of auth, cookie, token and key headers are `<redacted>`. */
  headers: Record<string, string>;
  /** Size of the --body-file body sent with every request; 0 without one. */
  bodyBytes: number;
  /** What counted as success: codes (`200`) and classes (`2xx`). */
  expectStatus: string[];
}

export interface StageReport {
  /** 1-based position in the run. */
  index: number;
  /** `rate`: requests are sent on a fixed schedule; `closed`: each connection sends as soon as it has its answer. */
  mode: 'rate' | 'closed';
  /** Requests per second offered by the schedule; null for closed-loop stages. */
  targetRps: number | null;
  connections: number;
  durationSec: number;
  /**
   * Seconds of discarded load at this stage's load that each side ran right before its measured part (0 for
   * none). Absent in older reports, where only the first stage had one (settings.warmupSec).
   */
  warmupSec?: number;
  direct: SideReport | null;
  tunnel: SideReport | null;
  /** tunnel relative to direct; null unless both sides ran. */
  comparison: Comparison | null;
  /** `--inspect both`: the same tunnel load through an agent with its inspector off (measured just before). */
  tunnelInspectorOff?: SideReport | null;
  /** `--inspect both`: tunnel (inspector on) relative to tunnelInspectorOff; null when either is missing. */
  inspectorCost?: InspectorCost | null;
}

/** The inspector's cost: on / off, so 1.05 is 5 % more CPU per request and 0.95 is 5 % less throughput. */
export interface InspectorCost {
  throughputRatio: number;
  /** Agent CPU per request, on / off; null when a CPU time is unknown. */
  agentCpuRatio: number | null;
  /** Edge + agent CPU per request, on / off; null when a CPU time is unknown. */
  tunnelCpuRatio: number | null;
}

export interface LatencyMs {
  min: number;
  mean: number;
  p50: number;
  p75: number;
  p90: number;
  p95: number;
  p99: number;
  p999: number;
  max: number;
}

export interface ProcessUsageReport {
  /** User + system CPU time during the stage. */
  cpuMs: number;
  /** cpuMs / wall time, in % of one core. */
  cpuPct: number;
  /** Peak resident set during the stage. */
  peakRssMb: number;
  /** cpuMs per request the side finished during the stage, in µs; null when none finished. */
  cpuPerRequestUs: number | null;
  /**
   * Time the process's threads were ready to run but waited for a core, summed over its threads, in % of
   * the stage's wall time (Linux schedstat); cpuPct + this near 100 is a process that wanted more CPU than
   * it got. null where it cannot be read. Absent in older reports.
   */
  runQueueWaitPct?: number | null;
  /**
   * The process's busiest thread's time on a core or waiting for one, in % of wall time (Linux schedstat):
   * near 100, a thread that never slept, saturated whether it got the core (busy) or not (starved); an
   * event loop with room sleeps between events. null where it cannot be read. Absent in older reports.
   */
  busiestThreadPct?: number | null;
}

export interface SideReport {
  /** Requests that finished during the stage: an answer of any status, or an error. */
  requests: number;
  /** Answers with an expected status (2xx unless settings.request.expectStatus says otherwise). */
  ok: number;
  /** Failed requests by kind: `http_<status>`, `timeout`, `reset`, `other`. */
  errors: Record<string, number>;
  /** ok / requests, in %. */
  successPct: number;
  /** Requests written (finished + still in flight when the stage stopped). */
  sent: number;
  /** Scheduled sends skipped because every request of that connection was still waiting for its answer. */
  missedSlots: number;
  /** sent / durationSec. */
  offeredRps: number;
  /** requests / durationSec. */
  achievedRps: number;
  /** Measured wall time of the stage. */
  durationSec: number;
  /** Response bytes received (headers + body). */
  bytes: number;
  /** Latency of answered requests (any status) as measured from the send. */
  latencyMs: LatencyMs;
  /** Latency corrected for coordinated omission (HDR, expected interval = connections / targetRps). */
  correctedLatencyMs: LatencyMs;
  /** correctedLatencyMs.p99, the headline number. */
  correctedP99Ms: number;
  /** Answers timed (any status): the samples latencyMs was computed from. Absent in older reports. */
  latencySamples?: number;
  /**
   * The percentiles of latencyMs and correctedLatencyMs read from too few samples: fewer than 10 of
   * latencySamples lie beyond them (n · (1 − p) < 10; p99 needs 1,000). Absent in older reports.
   */
  lowSamplePercentiles?: PercentileKey[];
  /** The stage second by second (a stall shows here, not in the stage's figures). Absent in older reports. */
  perSecond?: SecondPoint[];
  /** For fixed-rate stages: achievedRps >= 95 % of targetRps. Always true for closed-loop stages. */
  keptUp: boolean;
  /** Why a fixed-rate stage fell short of its target; null when it kept up. */
  shortfall: string | null;
  backend: ProcessUsageReport | null;
  /** Only on the tunnel side. */
  edge?: ProcessUsageReport | null;
  /** Only on the tunnel side. */
  agent?: ProcessUsageReport | null;
  /**
   * Only on the tunnel side: the tunnel's CPU per request, (edge + agent) cpuMs per finished request in µs.
   * null when a process's CPU time is unknown (not Linux) or no request finished.
   */
  tunnelCpuPerRequestUs?: number | null;
  /** The load generator (this process): when it is saturated, the numbers measure it, not the stack. */
  generator: ProcessUsageReport & { eventLoopDelayP99Ms: number };
  /** The machine during this side's measured part: load average and busy CPU. Absent in older reports. */
  machine?: MachineLoad;
}

/** One second of a stage, by completion time: what finished in [second, second + durationSec) of the stage. */
export interface SecondPoint {
  /** Seconds from the stage's first scheduled send to this second's start. */
  second: number;
  /** 1, except for the stage's last, partial second. */
  durationSec: number;
  /** Requests that finished in this second: answers of any status, and errors. */
  requests: number;
  /** Of those, failed ones (unexpected status, timeout, reset, ...). */
  errors: number;
  /** requests / durationSec. */
  achievedRps: number;
  /** p50 of the answers completed in this second, as measured (not corrected); null when none completed. */
  p50Ms: number | null;
  /** p99 of the same; null when none completed. */
  p99Ms: number | null;
  /** p50 / p99 when this second's answers are too few for them (p99 needs 1,000). */
  lowSamplePercentiles: PercentileKey[];
}

export interface Comparison {
  /** tunnel achievedRps / direct achievedRps. */
  throughputRatio: number;
  /** tunnel p50 - direct p50. */
  addedP50Ms: number;
  /** tunnel p99 - direct p99. */
  addedP99Ms: number;
  /** tunnel corrected p99 - direct corrected p99. */
  addedCorrectedP99Ms: number;
  /** tunnel p50 / direct p50. */
  p50Ratio: number;
  /** tunnel p99 / direct p99. */
  p99Ratio: number;
}

export interface SideTotals {
  requests: number;
  ok: number;
  errors: Record<string, number>;
  successPct: number;
}

export interface GateReport {
  /** --fail-under: every tunnel stage must reach this success %. */
  failUnderPct: number | null;
  /** --max-p99: every tunnel stage's corrected p99 must stay at or below this. */
  maxP99Ms: number | null;
  passed: boolean;
  /** One line per violated threshold. */
  violations: string[];
}
