import type { Knee, SideHold, SideReport, StageReport, VerdictRules } from '../plan/report-schema.js';

/** The p99 the verdict reads: corrected on a fixed-rate stage (the headline), as measured in a closed loop. */
export function p99Of(stage: StageReport, side: SideReport): number {
  return stage.mode === 'rate' ? side.correctedP99Ms : side.latencyMs.p99;
}

/** The highest p99 a side may show at a stage and still hold it, from its first stage's p99. */
export function p99Limit(baselineP99Ms: number, rules: VerdictRules): number {
  return Math.max(rules.p99Factor * baselineP99Ms, rules.p99FloorMs);
}

/** A latency in ms as the verdict writes it: one decimal under 10 ms. */
export const ms = (n: number): string => (n < 10 ? n.toFixed(1) : n.toFixed(0));

/**
 * Whether one side held one stage: achieved ≥ heldRatePct of the target (fixed rate only), success ≥
 * minSuccessPct, p99 within p99Limit of the side's first stage. The rate is read over the stage's planned
 * seconds, and a request still in flight when the stage stopped counts as achieved, at most one per
 * connection: a healthy side at 20 RPS whose answers take 25 ms has one in flight at any moment, which over
 * a 2 s stage is already 2.5 % of its 40 requests.
 */
export function holdOf(
  stage: StageReport,
  side: SideReport,
  baselineP99Ms: number,
  rules: VerdictRules,
): SideHold {
  const bends: SideHold['bend'][] = [];
  const parts: string[] = [];
  if (stage.targetRps !== null) {
    const inFlight = Math.min(Math.max(0, side.sent - side.requests), stage.connections);
    // Over the planned seconds: the measured ones run on to the load generator's next sample (tens of ms),
    // which at 20 RPS for 2 s alone costs 1.5 % of the rate.
    const seconds = Math.min(side.durationSec, stage.durationSec);
    const served = seconds > 0 ? (side.requests + inFlight) / seconds : 0;
    const pct = (100 * served) / stage.targetRps;
    if (pct < rules.heldRatePct) bends.push('rate');
    parts.push(
      `achieved ${side.achievedRps.toFixed(1)} of ${stage.targetRps} RPS (${pct.toFixed(1)} % counting those in flight)`,
    );
  } else parts.push(`achieved ${side.achievedRps.toFixed(1)} RPS`);
  if (side.successPct < rules.minSuccessPct) bends.push('errors');
  parts.push(`success ${side.successPct.toFixed(side.successPct === 100 ? 0 : 2)} %`);
  const p99 = p99Of(stage, side);
  const limit = p99Limit(baselineP99Ms, rules);
  if (p99 > limit) bends.push('latency');
  parts.push(`p99 ${ms(p99)} ms (limit ${ms(limit)} ms)`);
  const bend = bends[0] ?? null;
  return { held: bend === null, bend, reason: parts.join(', ') };
}

/**
 * The knee of a side: of the stages it held, the one at the highest target rate (closed loop: at the
 * highest achieved rate); a later stage wins a tie. Null when it held none.
 */
export function kneeOf(
  stages: readonly StageReport[],
  holds: readonly (SideHold | null)[],
  side: 'direct' | 'tunnel',
): Knee | null {
  let knee: Knee | null = null;
  let best = Number.NEGATIVE_INFINITY;
  stages.forEach((stage, i) => {
    const report = stage[side];
    if (report === null || holds[i]?.held !== true) return;
    const height = stage.targetRps ?? report.achievedRps;
    if (height < best) return;
    best = height;
    knee = {
      stage: stage.index,
      targetRps: stage.targetRps,
      connections: stage.connections,
      achievedRps: report.achievedRps,
    };
  });
  return knee;
}
