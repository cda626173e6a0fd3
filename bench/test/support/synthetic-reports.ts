/**
 * Small report.json bodies of every scenario family, in the shapes the kit writes them (report.schema.json
 * for the staged ones; each scenario's result type for the others), with the figures `compare` reads as
 * parameters. Only what a comparison reads is filled in; the rest of a real report is left out, as a
 * reader must ignore fields it does not know and cope with ones it lacks.
 */

export interface StagedFigures {
  p99: number;
  rps: number;
  edgeCpu: number;
  agentCpu: number;
  edgeRss: number;
  /** Each second's p99 and rate, around the stage's. */
  secondsP99?: number[];
  secondsRps?: number[];
}

const latency = (p50: number, p99: number) => ({
  min: p50 / 4,
  mean: p50 * 1.2,
  p50,
  p75: p50 * 1.3,
  p90: p50 * 1.8,
  p95: p50 * 2.5,
  p99,
  p999: p99 * 2,
  max: p99 * 3,
});

const usage = (cpuPerRequestUs: number, peakRssMb: number) => ({
  cpuMs: 1000,
  cpuPct: 20,
  peakRssMb,
  cpuPerRequestUs,
});

function perSecond(p99s: number[], rates: number[]) {
  return p99s.map((p99Ms, i) => ({
    second: i,
    durationSec: 1,
    requests: Math.round(rates[i] ?? 0),
    errors: 0,
    achievedRps: rates[i] ?? 0,
    p50Ms: 1,
    p99Ms,
    lowSamplePercentiles: [],
  }));
}

function side(f: StagedFigures, tunnel: boolean) {
  const seconds = f.secondsP99 ?? [f.p99, f.p99, f.p99, f.p99, f.p99];
  const rates = f.secondsRps ?? seconds.map(() => f.rps);
  return {
    requests: Math.round(f.rps * 10),
    ok: Math.round(f.rps * 10),
    errors: {},
    successPct: 100,
    sent: Math.round(f.rps * 10),
    missedSlots: 0,
    offeredRps: f.rps,
    achievedRps: f.rps,
    durationSec: 10,
    bytes: 1000,
    latencyMs: latency(1, f.p99),
    correctedLatencyMs: latency(1, f.p99),
    correctedP99Ms: f.p99,
    latencySamples: Math.round(f.rps * 10),
    lowSamplePercentiles: f.rps * 10 < 1000 ? ['p99', 'p999'] : ['p999'],
    perSecond: perSecond(seconds, rates),
    keptUp: true,
    shortfall: null,
    backend: usage(100, 60),
    generator: { ...usage(50, 80), eventLoopDelayP99Ms: 2 },
    ...(tunnel
      ? {
          edge: usage(f.edgeCpu, f.edgeRss),
          agent: usage(f.agentCpu, 70),
          tunnelCpuPerRequestUs: f.edgeCpu + f.agentCpu,
        }
      : {}),
  };
}

/** ramp / spike / constant / max: stages × direct and tunnel. */
export function stagedReport(
  scenario: string,
  stages: Array<{ rate: number | null; connections: number; direct: StagedFigures; tunnel: StagedFigures }>,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    schemaVersion: 1,
    scenario,
    command: `pnpm bench ${scenario}`,
    startedAt: '2026-11-28T20:00:00.000Z',
    finishedAt: '2026-11-28T20:01:00.000Z',
    environment: { node: 'v24', cpus: 2 },
    settings: { path: '/loadtest/get', sides: ['direct', 'tunnel'] },
    stages: stages.map((s, i) => ({
      index: i + 1,
      mode: s.rate === null ? 'closed' : 'rate',
      targetRps: s.rate,
      connections: s.connections,
      durationSec: 10,
      direct: side(s.direct, false),
      tunnel: side(s.tunnel, true),
      comparison: {
        throughputRatio: s.tunnel.rps / s.direct.rps,
        addedP50Ms: 0.5,
        addedP99Ms: s.tunnel.p99 - s.direct.p99,
        addedCorrectedP99Ms: s.tunnel.p99 - s.direct.p99,
        p50Ratio: 1.5,
        p99Ratio: s.tunnel.p99 / s.direct.p99,
      },
    })),
    aborted: null,
    totals: { direct: null, tunnel: null },
    gate: { failUnderPct: 99, maxP99Ms: null, passed: true, violations: [] },
    ...extra,
  };
}

/** The standalone scenarios' common wrapper (`result` holds the scenario's own shape). */
export function standaloneReport(scenario: string, result: Record<string, unknown>): Record<string, unknown> {
  return {
    schemaVersion: 1,
    scenario,
    command: `pnpm bench ${scenario}`,
    startedAt: '2026-11-28T20:00:00.000Z',
    finishedAt: '2026-11-28T20:01:00.000Z',
    environment: { node: 'v24' },
    result: { scenario, ...result },
    gate: { passed: true, violations: [] },
  };
}

const rss = (peakMb: number) => ({ startMb: 50, peakMb, endMb: 55, cpuMs: 300 });

/** bulk: transfers by direction and side. */
export function bulkResult(tunnelMbps: number, agentPeakMb: number) {
  const transfer = (direction: string, sideName: string, mbPerSec: number) => ({
    direction,
    side: sideName,
    bytes: 1 << 30,
    seconds: 1024 / mbPerSec,
    mbPerSec,
    error: null,
    warmup: { bytes: 1 << 26, mbPerSec: 500, error: null },
    edge: sideName === 'tunnel' ? rss(80) : null,
    agent: sideName === 'tunnel' ? rss(agentPeakMb) : null,
    backend: rss(60),
    clientCpuMs: 400,
  });
  return {
    bytes: 1 << 30,
    transfers: [
      transfer('download', 'direct', 2000),
      transfer('download', 'tunnel', tunnelMbps),
      transfer('upload', 'direct', 1800),
      transfer('upload', 'tunnel', tunnelMbps * 0.9),
    ],
  };
}

/** tcp: closed-loop rounds (repetitions) per side, and a summary. */
export function tcpResult(tunnelRpsByRound: number[], tunnelCpu: number) {
  const stage = (sideName: string, round: number, rps: number) => ({
    side: sideName,
    round,
    connections: 100,
    durationSec: 15,
    requests: rps * 15,
    ok: rps * 15,
    errors: 0,
    rps,
    p50Ms: 5,
    p99Ms: 20,
    backendCpuPerRequestUs: 90,
    edgeCpuPerRequestUs: sideName === 'tunnel' ? tunnelCpu / 2 : null,
    agentCpuPerRequestUs: sideName === 'tunnel' ? tunnelCpu / 2 : null,
    tunnelCpuPerRequestUs: sideName === 'tunnel' ? tunnelCpu : null,
    latencySamples: rps * 15,
    lowSamplePercentiles: [],
    perSecond: [],
  });
  const closedLoop = tunnelRpsByRound.flatMap((rps, i) => [
    stage('direct', i + 1, 10000),
    stage('tunnel', i + 1, rps),
  ]);
  return {
    settings: { connections: 100, rounds: tunnelRpsByRound.length },
    stack: { backendUrl: 'http://127.0.0.1:1' },
    closedLoop,
    transfers: [],
    summary: { directRps: 10000, tunnelRps: tunnelRpsByRound[0], tunnelCpuPerRequestUs: tunnelCpu },
  };
}

/** h2 / grpc / tls: rows of one load against several stacks, and targets. */
export function sideBySideResult(tunnelCpu: number, tunnelRps: number) {
  const row = (label: string, sideName: string, rps: number, between: number | null) => ({
    label,
    protocol: label.split(' ')[0],
    side: sideName,
    mode: 'rate',
    targetRps: 1000,
    connections: 10,
    streams: null,
    generator: 'autocannon',
    durationSec: 10,
    requests: rps * 10,
    ok: rps * 10,
    errors: {},
    rps,
    latencyMs: { p50: 1, p99: 4, mean: 1.2, max: 9 },
    bytesPerSec: null,
    missedSlots: 0,
    cpuPerRequestUs: between === null ? { backend: 80 } : { edge: between / 2, agent: between / 2 },
    betweenCpuPerRequestUs: between,
    rss: null,
    unavailable: null,
  });
  return {
    settings: { rates: [1000] },
    stack: {},
    rows: [row('h1 direct', 'direct', 1000, null), row('h2 tunnel', 'tunnel', tunnelRps, tunnelCpu)],
    targets: [{ name: 'h2 CPU', limit: '≤ h1', measured: 0.9, text: '0.9×', met: true, unavailable: null }],
  };
}

/** cluster: latency stages by route and rate, fault phases by kind. */
export function clusterResult(crossP99: number, nodesCpu: number) {
  const stage = (route: string, p99Ms: number, nodes: number) => ({
    route,
    targetRps: 500,
    requests: 10000,
    ok: 10000,
    errors: {},
    rps: 500,
    p50Ms: 0.7,
    p99Ms,
    cpuPerRequestUs: { ingress: nodes / 2, holder: nodes / 2, nodes, agent: 250, backend: 100 },
    latencySamples: 10000,
    lowSamplePercentiles: [],
    perSecond: [],
  });
  return {
    settings: { rates: [500] },
    latency: [stage('same-node', 3.3, 294), stage('cross-node', crossP99, nodesCpu)],
    faults: [
      {
        kind: 'kill',
        targetRps: 200,
        requests: 2000,
        ok: 2000,
        failed: 0,
        errors: {},
        events: ['killed'],
        recoveredAfterMs: 313,
        latencySamples: 2000,
        lowSamplePercentiles: [],
        perSecond: [],
      },
    ],
  };
}

/** wan: directions with direct and tunnel transfers, time to first byte. */
export function wanResult(tunnelDownloadMBps: number) {
  const transfer = (mbPerSec: number) => ({
    bytes: 1 << 28,
    seconds: 256 / mbPerSec,
    mbPerSec,
    timeLimited: false,
    verified: true,
    error: null,
    edge: null,
    agent: null,
    benchCpuMs: 100,
  });
  const direction = (direct: number, tunnel: number) => ({
    directMBps: direct,
    tunnelMBps: tunnel,
    direct: transfer(direct),
    tunnel: transfer(tunnel),
  });
  const ttfb = (p50Ms: number) => ({
    samples: 20,
    failed: 0,
    p50Ms,
    p95Ms: p50Ms + 2,
    maxMs: p50Ms + 5,
    lowSamplePercentiles: ['p95'],
  });
  return {
    settings: { rttMs: 50 },
    download: direction(200, tunnelDownloadMBps),
    upload: direction(200, 90),
    parallel: direction(300, 150),
    ttfb: {
      direct: ttfb(51),
      idle: ttfb(52),
      underLoad: ttfb(54),
      directUnderLoad: ttfb(53),
      directBulkMBps: 100,
      bulkMBps: 90,
      bulkError: null,
      benchLoopDelayMs: { p50: 1, max: 4 },
    },
    edgePeakRssMb: 90,
    agentPeakRssMb: 95,
  };
}

/** sessions: idle sessions on one edge, then streams in one. */
export function sessionsResult(edgeKbPerSession: number, edgePeakRssMb: number) {
  return {
    registry: 'memory',
    sessions: {
      requested: 10000,
      opened: 10000,
      lostWhileIdle: 0,
      connectSec: 4,
      claimsPerSec: 2500,
      idleSec: 10,
      edgeRssBeforeMb: 60,
      edgeRssAfterMb: 60 + (edgeKbPerSession * 10000) / 1024,
      edgePeakRssMb,
      edgeKbPerSession,
      edgeIdleCpuMsPerSec: 12,
    },
    streams: { requested: 1000, maxConcurrent: 1000, answered: 1000, wrong: 0, failed: 0, durationMs: 800 },
    redis: null,
  };
}

/** floor: direct, relay, http-relay and tunnel stages, and a summary of ratios. */
export function floorResult(tunnelCpu: number) {
  const stage = (sideName: string, mode: string, between: number | null) => ({
    side: sideName,
    mode,
    targetRps: mode === 'rate' ? 1000 : null,
    connections: mode === 'rate' ? 100 : 50,
    durationSec: 10,
    requests: 10000,
    ok: 10000,
    errors: 0,
    rps: 1000,
    p50Ms: 0.5,
    p99Ms: 3,
    backendCpuPerRequestUs: 90,
    edgeCpuPerRequestUs: between === null ? null : between / 2,
    agentCpuPerRequestUs: between === null ? null : between / 2,
    betweenCpuPerRequestUs: between,
    latencySamples: 10000,
    lowSamplePercentiles: [],
    perSecond: [],
  });
  return {
    settings: { ratePerSec: 1000 },
    stages: [stage('direct', 'rate', null), stage('relay', 'rate', 120), stage('tunnel', 'rate', tunnelCpu)],
    summary: {
      relayCpuPerRequestUs: 120,
      tunnelCpuPerRequestUs: tunnelCpu,
      tunnelOverRelayCpu: tunnelCpu / 120,
    },
  };
}
