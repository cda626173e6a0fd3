import type {
  BenchReport,
  Knee,
  SideHold,
  StageVerdict,
  Verdict,
  VerdictRules,
  VerdictWarning,
} from '../plan/report-schema.js';
import { holdOf, kneeOf, p99Of } from './side-hold.js';
import { readStage } from './stage-reading.js';
import { costSentence } from './tunnel-cost.js';
import { VERDICT_RULES } from './verdict-rules.js';
import { explained, looseBaseline, mergeWarnings, otherCpuPct, stageWarnings } from './verdict-warnings.js';

/** What the verdict reads of a report: everything it says comes from these figures. */
export type VerdictInput = Pick<BenchReport, 'stages' | 'settings' | 'aborted'>;

const SIDE_NAMES = { backend: 'The backend', tunnel: 'The tunnel', generator: 'The load generator' } as const;

function kneeText(side: 'direct' | 'tunnel', knee: Knee | null, ran: boolean): string | null {
  if (!ran) return null;
  if (knee === null) return `the ${side} side held no stage`;
  const at = knee.targetRps === null ? `${knee.connections} connections` : `${knee.targetRps} RPS`;
  return `the ${side} side held up to stage ${knee.stage} (${at}, ${knee.achievedRps.toFixed(0)} RPS achieved)`;
}

function summaryOf(
  verdict: Omit<Verdict, 'summary' | 'cost' | 'rules' | 'warnings'>,
  input: VerdictInput,
): string {
  const sides = input.settings.sides;
  const knees = [
    kneeText('direct', verdict.knee.direct, sides.includes('direct')),
    kneeText('tunnel', verdict.knee.tunnel, sides.includes('tunnel')),
  ].filter((t): t is string => t !== null);
  const kneeLine = knees.length > 0 ? ` Knee: ${knees.join('; ')}.` : '';
  const last = input.stages[input.stages.length - 1];
  const stopped = input.aborted === null ? '' : ` The run stopped early (${input.aborted}).`;
  if (verdict.saturated === 'none') {
    const load = last?.targetRps == null ? `${last?.connections} connections` : `${last.targetRps} RPS`;
    const upTo =
      last === undefined ? '(no stage ran)' : `up to the last stage, stage ${last.index} (${load})`;
    return `Nothing saturated ${upTo}: every side held every stage.${kneeLine}${stopped}`;
  }
  const stage = verdict.stages.find((s) => s.index === verdict.stage)!;
  const where =
    verdict.process !== null && verdict.process !== verdict.saturated ? ` in the ${verdict.process}` : '';
  const head =
    verdict.saturated === 'unknown'
      ? `Something saturated that the figures cannot place, at stage ${verdict.stage}`
      : `${SIDE_NAMES[verdict.saturated]} saturated first${where}, at stage ${verdict.stage}`;
  const at = input.stages.find((s) => s.index === verdict.stage);
  const rate = at?.targetRps == null ? '' : ` (${at.targetRps} RPS)`;
  // A busy machine at the very stage that bent changes the reading more than any other warning.
  const others =
    at === undefined ? [] : [at.direct, at.tunnel].map((s) => (s === null ? null : otherCpuPct(s)));
  const busiest = Math.max(0, ...others.map((o) => o ?? 0));
  // A --target is not metered, so its own CPU counts as outside the run: a backend at a core is no neighbour.
  const target = input.settings.targetUrl == null ? '' : ', your --target included if it runs here';
  const busy = stage.warnings.some((w) => w.kind === 'busy-machine')
    ? ` The machine was busy at that stage (${busiest.toFixed(0)} % of a core used outside the run${target}): measure it again on a quieter one before trusting this.`
    : '';
  return `${head}${rate}: ${stage.reason}.${busy}${kneeLine}${stopped}`;
}

/**
 * The verdict of a staged run (ramp, spike, constant, max): each stage's sides held or not, what gave out
 * first and where, each side's knee, the tunnel's cost in a sentence, and the warnings that change how
 * the figures read. Pure: the same report always gets the same verdict.
 */
export function buildVerdict(input: VerdictInput, rules: VerdictRules = VERDICT_RULES): Verdict {
  const targetGiven = input.settings.targetUrl != null;
  const baseline = (side: 'direct' | 'tunnel'): number | null => {
    const first = input.stages.find((stage) => stage[side] !== null);
    return first === undefined ? null : p99Of(first, first[side]!);
  };
  const baselines = { direct: baseline('direct'), tunnel: baseline('tunnel') };
  const holdsOf = (side: 'direct' | 'tunnel'): (SideHold | null)[] =>
    input.stages.map((stage) => {
      const report = stage[side];
      const base = baselines[side];
      return report === null || base === null ? null : holdOf(stage, report, base, rules);
    });
  const holds = { direct: holdsOf('direct'), tunnel: holdsOf('tunnel') };
  const stages: StageVerdict[] = input.stages.map((stage, i) => {
    const stageHolds = { direct: holds.direct[i] ?? null, tunnel: holds.tunnel[i] ?? null };
    const reading = readStage(stage, stageHolds, { rules, targetGiven });
    return {
      index: stage.index,
      ...stageHolds,
      ...reading,
      cost: costSentence(stage),
      warnings: stageWarnings(stage, input.stages, { rules, targetGiven }),
    };
  });
  const first = stages.find((s) => s.saturated !== 'none');
  const knee = {
    direct: kneeOf(input.stages, holds.direct, 'direct'),
    tunnel: kneeOf(input.stages, holds.tunnel, 'tunnel'),
  };
  const core = {
    saturated: first?.saturated ?? 'none',
    process: first?.process ?? null,
    stage: first?.index ?? null,
    knee,
    stages,
  } as const;
  const runWarnings: VerdictWarning[] = [];
  if (!input.settings.sides.includes('direct')) {
    runWarnings.push({
      kind: 'no-direct-side',
      stages: [],
      text: 'only the tunnel side ran: without the direct side beside it, the backend and the tunnel are told apart by their CPU alone',
    });
  }
  for (const side of ['direct', 'tunnel'] as const) {
    const loose = looseBaseline(input.stages, side, rules);
    if (loose !== null) runWarnings.push(loose);
  }
  if (input.settings.tunnelGiven === true) {
    runWarnings.push({
      kind: 'not-metered',
      stages: [],
      text: "the tunnel is the --tunnel-url given: its edge and agent are not the kit's, so neither is metered or named",
    });
  }
  // The cost at the tunnel's knee, or at its last stage when it held none.
  const costStage = stages.find((s) => s.index === knee.tunnel?.stage) ?? stages[stages.length - 1];
  return {
    rules,
    ...core,
    summary: summaryOf(core, input),
    cost: costStage?.cost ?? null,
    warnings: [...runWarnings, ...mergeWarnings(stages.flatMap((s) => s.warnings))],
    // Each stage's own warnings say what they mean too: a stage is read on its own in report.json.
    stages: stages.map((s) => ({ ...s, warnings: s.warnings.map(explained) })),
  };
}
