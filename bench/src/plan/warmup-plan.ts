import type { StagePlan } from './scenarios.js';

/**
 * How long each stage is warmed up: discarded load at the stage's own rate (or connection count), right
 * before each side's measured part.
 *
 * By default 10 % of the stage, between 1 s and 10 s: every stage of a ramp opens its own connections at a
 * new rate, and the first seconds at that rate (connection setup through the tunnel, pools and buffers
 * growing, V8 optimizing the paths the new rate heats) are a transition, not the stage. A tenth covers the
 * couple of seconds that transition lasts on a 30 s stage while adding a tenth to the run; below 1 s a
 * 20 RPS stage would send a handful of requests; above 10 s a five-minute stage gains nothing (10 s was the
 * old fixed warm-up). `--warmup <s>` keeps its meaning: that long before the first stage of each side only
 * (0: none), which is what a cold-start measurement asks for.
 */
export interface WarmupPlan {
  /** Seconds of warm-up before `stage` on each side; 0 for none. */
  secondsFor(stage: StagePlan): number;
  /** The rule, for the reports. */
  readonly rule: string;
}

export const WARMUP_SHARE = 0.1;
export const WARMUP_MIN_SEC = 1;
export const WARMUP_MAX_SEC = 10;

/** 10 % of the stage, clamped to 1–10 s, to a tenth of a second. */
export function proportionalWarmupSec(durationSec: number): number {
  const share = Math.round(durationSec * WARMUP_SHARE * 10) / 10;
  return Math.min(WARMUP_MAX_SEC, Math.max(WARMUP_MIN_SEC, share));
}

/** True when the command line set --warmup itself (cli-args.ts fills in its default otherwise). */
export function warmupGiven(argv: readonly string[]): boolean {
  return argv.some((arg) => arg === '--warmup' || arg.startsWith('--warmup='));
}

/**
 * @param given the --warmup value when the command line set it, else null.
 */
export function planWarmup(given: number | null): WarmupPlan {
  if (given === null) {
    return {
      secondsFor: (stage) => proportionalWarmupSec(stage.durationSec),
      rule:
        `${WARMUP_SHARE * 100} % of each stage, ${WARMUP_MIN_SEC}–${WARMUP_MAX_SEC} s, ` +
        "before every stage on each side, at the stage's load",
    };
  }
  return {
    secondsFor: (stage) => (stage.index === 1 ? given : 0),
    rule:
      given === 0
        ? '--warmup 0: none'
        : `--warmup ${given}: ${given} s before the first stage on each side, at its load`,
  };
}
