/**
 * The verdict in report.json (schemaVersion 1, added within it): the kit's reading of a staged run, made by
 * the pure functions of ../verdict/ from the figures the report already holds. bench/report.schema.json
 * says the same as a JSON Schema; bench/README.md ("The verdict") explains every field and rule.
 */

/** The side that gave out first: its own figures bent at a stage the others held. */
export type Saturated = 'none' | 'backend' | 'tunnel' | 'generator' | 'unknown';

/** The process a saturation is placed in, when one can be named. */
export type SaturatedProcess = 'backend' | 'edge' | 'agent' | 'generator';

/** Why a side did not hold a stage, hardest first: rate short of the target, failed requests, a p99 that bent. */
export type Bend = 'rate' | 'errors' | 'latency';

/** The thresholds the verdict applied, so a reader can check it against the figures. */
export interface VerdictRules {
  /** A fixed-rate stage is held when achieved ≥ this share of its target, in % (in-flight at the stop counted, one per connection). */
  heldRatePct: number;
  /** ... and success ≥ this, in %. */
  minSuccessPct: number;
  /** ... and its p99 is at most this many times the side's first-stage p99 ... */
  p99Factor: number;
  /** ... or at most this, in ms, whichever is larger: a p99 this low never counts as bent. */
  p99FloorMs: number;
  /** A process whose busiest thread was on a core or waiting for one this % of the time (or whose CPU reached it) is saturated. */
  nearCorePct: number;
  /** Machine CPU used by processes outside the run beyond this, in % of one core, makes a busy machine. */
  busyOtherCpuPct: number;
}

/** Whether one side held one stage. */
export interface SideHold {
  held: boolean;
  /** Hardest reason it did not hold; null when held. */
  bend: Bend | null;
  /** One line with the figures behind `held`. */
  reason: string;
}

export type WarningKind =
  | 'low-samples'
  | 'idle-cpu'
  | 'busy-machine'
  | 'loose-baseline'
  | 'no-direct-side'
  | 'not-metered';

/** Something that changes how a figure should be read. */
export interface VerdictWarning {
  kind: WarningKind;
  /** The stages it concerns (1-based); empty when it is about the whole run. */
  stages: number[];
  text: string;
}

export interface StageVerdict {
  index: number;
  direct: SideHold | null;
  tunnel: SideHold | null;
  /** What gave out at this stage; `none` when every side that ran held it. */
  saturated: Saturated;
  process: SaturatedProcess | null;
  /** One line: why this reading, with the figures. */
  reason: string;
  /** The tunnel's cost at this stage in one sentence; null unless both sides ran. */
  cost: string | null;
  warnings: VerdictWarning[];
}

/** The highest stage a side held (closed loop: the held stage with the highest achieved rate). */
export interface Knee {
  stage: number;
  targetRps: number | null;
  connections: number;
  achievedRps: number;
}

export interface Verdict {
  rules: VerdictRules;
  /** What saturated first over the run, at `stage`; `none`: nothing up to the last stage. */
  saturated: Saturated;
  process: SaturatedProcess | null;
  /** The first stage that was not held (null for `none`). */
  stage: number | null;
  /** Per side, null when the side did not run or held no stage. */
  knee: { direct: Knee | null; tunnel: Knee | null };
  /** The reading in one or two sentences, to paste. */
  summary: string;
  /** The tunnel's cost at its knee (or its last stage when it held none) in one sentence; null unless both sides ran. */
  cost: string | null;
  /** Every stage's warnings, merged by kind. */
  warnings: VerdictWarning[];
  stages: StageVerdict[];
}

/** The machine around one side of one stage. */
export interface MachineLoad {
  /** 1-minute load average when the side's measured part started and when it stopped. */
  loadAverageBefore: number;
  loadAverageAfter: number;
  /** CPU the whole machine was busy during it, in % of one core (200 = two cores); null off Linux. */
  busyCpuPct: number | null;
}
