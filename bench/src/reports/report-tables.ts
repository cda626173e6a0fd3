import {
  count,
  errorsText,
  marked,
  median,
  microseconds,
  ms,
  pct,
  ratio,
  rps,
  signedMs,
  stageLabel,
  usageText,
} from '../measure/report-format.js';
import type { BenchReport, Settings, SideReport } from '../plan/report-schema.js';

/** A table as text cells: report.md renders it with pipes, report.html as <table>. */
export interface Table {
  header: string[];
  rows: string[][];
}

export function totalsTable(report: BenchReport): Table {
  return {
    header: ['side', 'requests', 'ok', 'success (%)', 'errors'],
    rows: report.settings.sides.map((side) => {
      const t = report.totals[side];
      return t === null
        ? [side, '–', '–', '–', '–']
        : [side, count(t.requests), count(t.ok), pct(t.successPct), errorsText(t.errors)];
    }),
  };
}

/** Throughput, outcomes and latency of every stage and side. ⚠ marks a stage that fell short of its target. */
export function stageTable(report: BenchReport): Table {
  const rows: string[][] = [];
  for (const stage of report.stages) {
    for (const side of report.settings.sides) {
      const s = stage[side];
      if (s === null) continue;
      const l = s.latencyMs;
      const flagged = s.lowSamplePercentiles;
      rows.push([
        `${stage.index}`,
        stageLabel(stage),
        side,
        `${rps(s.achievedRps)}${s.keptUp ? '' : ' ⚠'}`,
        count(s.requests),
        pct(s.successPct),
        errorsText(s.errors),
        ms(l.min),
        ms(l.mean),
        marked(ms(l.p50), 'p50', flagged),
        marked(ms(l.p75), 'p75', flagged),
        marked(ms(l.p95), 'p95', flagged),
        marked(ms(l.p99), 'p99', flagged),
        marked(ms(l.p999), 'p999', flagged),
        ms(l.max),
        marked(ms(s.correctedP99Ms), 'p99', flagged),
      ]);
    }
  }
  return {
    header: [
      '#',
      'load',
      'side',
      'achieved (req/s)',
      'requests',
      'success (%)',
      'errors',
      'min (ms)',
      'mean (ms)',
      'p50 (ms)',
      'p75 (ms)',
      'p95 (ms)',
      'p99 (ms)',
      'p99.9 (ms)',
      'max (ms)',
      'p99 corrected (ms)',
    ],
    rows,
  };
}

/** Whether any stage's percentile was read from too few samples (the footnote is printed then). */
export function anyLowSample(report: BenchReport): boolean {
  return report.stages.some((stage) =>
    report.settings.sides.some((side) => (stage[side]?.lowSamplePercentiles?.length ?? 0) > 0),
  );
}

/** The mark of a tunnel − direct difference: flagged when either side's percentile is. */
function eitherFlagged(a: SideReport | null, b: SideReport | null) {
  return [...(a?.lowSamplePercentiles ?? []), ...(b?.lowSamplePercentiles ?? [])];
}

/** Stages that fell short of their target, with the measured reason. */
export function shortfalls(report: BenchReport): string[] {
  const lines: string[] = [];
  for (const stage of report.stages) {
    for (const side of report.settings.sides) {
      const s = stage[side];
      if (s !== null && !s.keptUp && s.shortfall !== null)
        lines.push(`stage ${stage.index} ${side}: ${s.shortfall}`);
    }
  }
  return lines;
}

/** What the tunnel adds, stage by stage; empty unless both sides ran. */
export function costTable(report: BenchReport): Table {
  return {
    header: [
      '#',
      'load',
      'throughput tunnel/direct (×)',
      '+p50 (ms)',
      '+p99 (ms)',
      '+p99 corrected (ms)',
      'p50 ratio (×)',
      'p99 ratio (×)',
    ],
    rows: report.stages
      .filter((stage) => stage.comparison !== null)
      .map((stage) => {
        const c = stage.comparison!;
        const flagged = eitherFlagged(stage.direct, stage.tunnel);
        return [
          `${stage.index}`,
          stageLabel(stage),
          ratio(c.throughputRatio),
          marked(signedMs(c.addedP50Ms), 'p50', flagged),
          marked(signedMs(c.addedP99Ms), 'p99', flagged),
          marked(signedMs(c.addedCorrectedP99Ms), 'p99', flagged),
          marked(ratio(c.p50Ratio), 'p50', flagged),
          marked(ratio(c.p99Ratio), 'p99', flagged),
        ];
      }),
  };
}

/** `--inspect both`: the tunnel side with the agent's inspector off and on, and on / off (1.05× = 5 % more). */
export function inspectorTable(report: BenchReport): Table {
  const rows: string[][] = [];
  for (const stage of report.stages) {
    const off = stage.tunnelInspectorOff;
    const on = stage.tunnel;
    const cost = stage.inspectorCost;
    if (off == null || on === null || cost == null) continue;
    const orNone = (value: number | null): string => (value === null ? '–' : ratio(value));
    rows.push([
      `${stage.index}`,
      stageLabel(stage),
      `${rps(off.achievedRps)} → ${rps(on.achievedRps)}`,
      ratio(cost.throughputRatio),
      `${microseconds(off.agent?.cpuPerRequestUs)} → ${microseconds(on.agent?.cpuPerRequestUs)}`,
      orNone(cost.agentCpuRatio),
      `${microseconds(off.tunnelCpuPerRequestUs)} → ${microseconds(on.tunnelCpuPerRequestUs)}`,
      orNone(cost.tunnelCpuRatio),
    ]);
  }
  const costs = report.stages.flatMap((stage) => (stage.inspectorCost == null ? [] : [stage.inspectorCost]));
  if (costs.length > 1) {
    // Several stages at one load (`--connections 50,50,50,50`) are repeats: their median is the figure.
    const medianOf = (pick: (cost: (typeof costs)[number]) => number | null): string => {
      const middle = median(costs.map(pick).filter((value): value is number => value !== null));
      return middle === null ? '–' : ratio(middle);
    };
    rows.push([
      'median',
      `${costs.length} stages`,
      '',
      medianOf((cost) => cost.throughputRatio),
      '',
      medianOf((cost) => cost.agentCpuRatio),
      '',
      medianOf((cost) => cost.tunnelCpuRatio),
    ]);
  }
  return {
    header: [
      '#',
      'load',
      'rate off → on (req/s)',
      'on/off',
      'agent CPU/req off → on',
      'on/off',
      'edge + agent off → on',
      'on/off',
    ],
    rows,
  };
}

/** CPU time and peak RSS of every process during every stage. */
export function processTable(report: BenchReport): Table {
  const hasTunnel = report.settings.sides.includes('tunnel');
  const rows: string[][] = [];
  for (const stage of report.stages) {
    for (const side of report.settings.sides) {
      const s = stage[side];
      if (s === null) continue;
      const row = [`${stage.index}`, stageLabel(stage), side, usageText(s.backend)];
      if (hasTunnel) row.push(usageText(s.edge), usageText(s.agent), microseconds(s.tunnelCpuPerRequestUs));
      row.push(`${s.generator.cpuPct.toFixed(0)} % · loop p99 ${ms(s.generator.eventLoopDelayP99Ms)} ms`);
      rows.push(row);
    }
  }
  return {
    header: [
      '#',
      'load',
      'side',
      'backend',
      ...(hasTunnel ? ['edge', 'agent', 'tunnel CPU per request (edge + agent)'] : []),
      'load generator',
    ],
    rows,
  };
}

/** How to read the tables, saying what each side of this run was (the kit's stack, --target, --tunnel-url). */
export function howToRead(settings: Settings): string {
  const kitTunnel = settings.sides.includes('tunnel') && settings.tunnelGiven !== true;
  const sides = [
    kitTunnel
      ? `The tunnel side goes through the edge and the agent the kit started, each its own process, to ${
          settings.targetUrl == null ? 'the test backend' : 'your --target'
        }.`
      : settings.sides.includes('tunnel')
        ? "The tunnel side is the --tunnel-url given: its edge and agent are not the kit's and are not metered."
        : '',
    settings.sides.includes('direct')
      ? `The direct side hits ${settings.targetUrl == null ? 'the same backend process' : 'your --target itself'}.`
      : '',
  ];
  return [
    'Achieved rate counts finished requests per second. Latencies are in ms from the moment a request is written.',
    'p99 corrected adds back the requests a stalled connection did not send (HDR, expected interval =',
    'connections / target rate), so a stall cannot hide in it; in closed-loop stages it equals p99.',
    ...sides.filter((text) => text !== ''),
    'Process cells: CPU time during the stage (% of one core) · CPU per request · peak RSS during the stage.',
    kitTunnel
      ? "Tunnel CPU per request is the edge's and the agent's CPU time over the requests the stage finished."
      : '',
    'Second by second: each stage is also recorded per second of completion (rate, errors, p50 and p99 of what',
    'completed in that second, as measured), so a stall shows as a second with a low rate and a high p99',
    "instead of being averaged into the stage's figures. Each stage's warm-up ran before its measured part",
    'and is not in any figure.',
    'All processes share this machine with the load generator.',
  ]
    .filter((text) => text !== '')
    .join(' ');
}
