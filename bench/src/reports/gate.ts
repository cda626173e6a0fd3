import type { GateReport, SideName, StageReport } from '../plan/report-schema.js';
import { LOW_SAMPLE_MARK } from '../plan/sample-sufficiency.js';

export interface GateThresholds {
  failUnderPct: number | null;
  maxP99Ms: number | null;
}

/**
 * The CI gate: every stage of the gated side must reach the success rate and stay under the corrected p99.
 * The gated side is the tunnel (the direct side when it is the only one measured): the direct side is the
 * baseline, not the product. Corrected p99 is used because it is the one a stall cannot hide from.
 */
export function evaluateGate(
  stages: StageReport[],
  sides: SideName[],
  thresholds: GateThresholds,
  aborted: string | null,
): GateReport {
  const side: SideName = sides.includes('tunnel') ? 'tunnel' : 'direct';
  const violations: string[] = [];
  if (aborted !== null) violations.push(`the run stopped early: ${aborted}`);
  for (const stage of stages) {
    const report = stage[side];
    if (report === null) continue;
    const label = `stage ${stage.index} (${stage.targetRps === null ? `${stage.connections} connections` : `${stage.targetRps} RPS`}) ${side}`;
    if (thresholds.failUnderPct !== null && report.successPct < thresholds.failUnderPct) {
      violations.push(`${label}: success ${report.successPct} % < --fail-under ${thresholds.failUnderPct} %`);
    }
    if (thresholds.maxP99Ms !== null && report.correctedP99Ms > thresholds.maxP99Ms) {
      // A p99 from fewer than 1,000 answers is about the slowest few: the gate still applies it, and says so.
      const few =
        report.lowSamplePercentiles?.includes('p99') === true
          ? ` (${LOW_SAMPLE_MARK} from ${report.latencySamples ?? report.requests} answers: too few for a p99)`
          : '';
      violations.push(
        `${label}: corrected p99 ${report.correctedP99Ms} ms${few} > --max-p99 ${thresholds.maxP99Ms} ms`,
      );
    }
  }
  return {
    failUnderPct: thresholds.failUnderPct,
    maxP99Ms: thresholds.maxP99Ms,
    passed: violations.length === 0,
    violations,
  };
}
