import type { ScenarioName } from './report-schema.js';

/** The defaults of a scenario: the measurements the reports this project grew from made. */
export interface ScenarioDefaults {
  title: string;
  /** One line on what the scenario answers. */
  purpose: string;
  /** Fixed-rate scenarios: the target rate of each stage. */
  rates: number[];
  /** max: the connection count of each stage. */
  connections: number[];
  durationSec: number;
}

export const SCENARIOS: Record<ScenarioName, ScenarioDefaults> = {
  ramp: {
    title: 'Ramp',
    purpose: 'fixed-rate stages one after the other: where latency bends and errors start',
    rates: [20, 50, 100, 200, 500, 1000],
    connections: [],
    durationSec: 30,
  },
  spike: {
    title: 'Spike',
    purpose: 'two-minute runs at high fixed rates: success rate and corrected p99 under a burst',
    rates: [600, 800, 900, 1000],
    connections: [],
    durationSec: 120,
  },
  constant: {
    title: 'Constant pressure',
    purpose: 'one fixed rate held for minutes: drift, leaks and slow degradation',
    rates: [300],
    connections: [],
    durationSec: 300,
  },
  max: {
    title: 'Maximum throughput',
    purpose: 'closed loop (each connection sends when it has its answer): the most each side can serve',
    rates: [],
    connections: [50, 100],
    durationSec: 30,
  },
};

export function isScenarioName(name: string): name is ScenarioName {
  return Object.hasOwn(SCENARIOS, name);
}

/** One stage as planned: the same parameters are run against each side. */
export interface StagePlan {
  index: number;
  mode: 'rate' | 'closed';
  targetRps: number | null;
  connections: number;
  durationSec: number;
}

/**
 * Connections for a fixed rate when not given: one per 10 RPS, so each connection sends every 100 ms and
 * an answer may take up to 100 ms before the schedule slips (a slip is then counted and HDR-corrected).
 */
export function autoConnections(ratePerSec: number): number {
  return Math.min(1000, Math.max(1, Math.ceil(ratePerSec / 10)));
}

export interface PlanInput {
  scenario: ScenarioName;
  rates: number[];
  connections: number[];
  durationSec: number;
}

export function planStages(input: PlanInput): StagePlan[] {
  if (input.scenario === 'max') {
    return input.connections.map((connections, i) => ({
      index: i + 1,
      mode: 'closed',
      targetRps: null,
      connections,
      durationSec: input.durationSec,
    }));
  }
  const fixed = input.connections[0];
  return input.rates.map((rate, i) => ({
    index: i + 1,
    mode: 'rate',
    targetRps: rate,
    connections: fixed ?? autoConnections(rate),
    durationSec: input.durationSec,
  }));
}

/** Scenarios outside the stage model (see standalone-scenarios.ts), as the usage text lists them. */
export const STANDALONE_USAGE = `
  bulk       1 GiB download and upload through direct, the  --size 1024 (MiB) --warmup-mib 128
             byte floor (relay: pnpm bench floor's bare     --only direct|relay|tunnel
             relay pair) and the tunnel, each after a       --min-mbps <n> (tunnel MB/s)
             discarded warm-up; tunnel / byte floor and     --min-floor-ratio <x> (tunnel / byte floor,
             tunnel / direct per direction                  each direction)
             --cold: each through fresh processes, no       --cold (--size defaults to 100)
             warm-up
  sessions   10,000 idle sessions on one edge (KB each),    --sessions 10000 --streams 1000 --idle 15
             then 1,000 concurrent streams in one session   --max-kb-per-session <n>
             (--registry redis: a cluster node on a real    --registry memory|redis --lease-ttl 10 (s)
             redis-server; Redis commands, round trips,
             memory and CPU per session)
  npx        cold and warm \`npx @tunnel2/cli\` start time    --runs 5
  floor      direct, a bare Node.js relay pair (the floor)  --rate 1000 --connections 100 --duration 20
             a bare HTTP relay pair (the HTTP floor) and    --warmup 5
             the tunnel: CPU per request and throughput
  cluster    3 nodes + Redis + HAProxy: same- vs cross-node --rates 500 --duration 20 --warmup 5
             p50/p99 and CPU per request, then a rolling    --fault-rate 200 --settle 3
             restart and a kill -9 under load (failures)
  wan        the agent a round trip away (a delay link):    --rtt 50 (ms) --size 256 (MiB) --time-limit 40 (s)
             download, upload, 6 parallel downloads, direct (pnpm bench wan --help for more)
             vs tunnel, and small requests' time to first
             byte during a download
  tcp        a TCP tunnel (tunnel2 tcp) vs direct: closed   --connections 100 --duration 15 --size 1024
             loop RPS and CPU per request, 1 GiB each way   --min-ratio --max-cpu-us --min-mbps
             with RSS                                       (pnpm bench tcp --help for more)
  h2         HTTP/2 (h2c) through the tunnel vs HTTP/1.1    --rates 200,1000 --connections 10 --streams 10
             through it, and each direct: fixed rates and   --duration 10 --warmup 3
             an h2load closed loop, CPU per request         (pnpm bench h2 --help for more)
  grpc       grpc-js unary calls (fixed rate, closed loop)  --rate 500 --concurrency 50 --duration 10
             and a bidi stream, direct vs tunnel (--h2c):   --message-kib 64
             CPU per call, stream MB/s and RSS              (pnpm bench grpc --help for more)
  tls        TLS at the edge vs HAProxy terminating TLS in  --rate 500 --duration 10 --warmup 3
             front of the plain edge: CPU per request       (pnpm bench tls --help for more)
`;

const STANDALONE_NAMES = [
  'bulk',
  'sessions',
  'npx',
  'floor',
  'cluster',
  'wan',
  'tcp',
  'h2',
  'grpc',
  'tls',
] as const;
export type StandaloneName = (typeof STANDALONE_NAMES)[number];

export function isStandalone(name: string | undefined): name is StandaloneName {
  return (STANDALONE_NAMES as readonly (string | undefined)[]).includes(name);
}

/** `pnpm bench wan --help`. */
export const WAN_USAGE = `usage: pnpm bench wan [--rtt <ms>] [--size <MiB>] [--time-limit <s>] [--out <dir>]

The agent reaches the edge through a delay link on loopback (a userspace TCP proxy holding each direction
for half the round trip, at most 64 MiB per direction); the client talks to the edge directly and the
backend is local to the agent. Measured, each beside the same transfer "direct" from the client to the
backend through a second link of the same round trip (what the link alone carries):
  - one download (GET /bytes/<size>) and one upload (chunked POST /upload), SHA-256 checked;
  - 6 concurrent 32 MiB downloads (a browser loading a page), aggregate MB/s;
  - the time to first byte of small requests (GET /loadtest/get every 100 ms) through the tunnel, idle and
    while a large download runs on the same session;
  - the edge's and the agent's peak RSS and CPU.

flags:
  --rtt <ms>          the link's round trip (default 50)
  --size <MiB>        the single download and upload (default 256)
  --time-limit <s>    each transfer stops here and its rate is over what moved, marked time-limited (default 40)
  --out <dir>         where report.json and report.md go (default bench/results/wan-<time>)

targets (issue #21; the gate, exit 1 when one is missed or a transfer fails): tunnel download and upload
≥ 3,000 / rtt MB/s (60 at 50 ms, 30 at 100 ms); the link alone ≥ 3× that; a small request's time to first
byte during a download (p50) ≤ rtt + 5 ms.
`;
