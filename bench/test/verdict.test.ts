import { describe, expect, it } from 'vitest';
import type { BenchReport, StageReport } from '../src/plan/report-schema.js';
import { buildVerdict } from '../src/verdict/build-verdict.js';
import { holdOf } from '../src/verdict/side-hold.js';
import { VERDICT_RULES } from '../src/verdict/verdict-rules.js';
import { input, type SideCase, stage, usage } from './support/verdict-report.js';

// The verdict's rules as table cases, on reports built here (support/verdict-report.ts): whether a side
// held a stage, and what saturated first and where. Its parts: verdict-parts.test.ts.
describe('holdOf: a side held a stage', () => {
  const cases: {
    name: string;
    target: number | null;
    c: SideCase;
    base: number;
    held: boolean;
    bend: string | null;
  }[] = [
    { name: 'on target, no errors, flat p99', target: 100, c: {}, base: 3, held: true, bend: null },
    { name: '98 % of target', target: 100, c: { rps: 98 }, base: 3, held: false, bend: 'rate' },
    // 495 finished + 5 in flight at the stop = 500 of 500 scheduled.
    {
      name: '99 % finished, the rest in flight',
      target: 100,
      c: { rps: 99, sent: 500 },
      base: 3,
      held: true,
      bend: null,
    },
    // In flight beyond one per connection (10) do not count.
    { name: 'many in flight', target: 100, c: { rps: 90, sent: 500 }, base: 3, held: false, bend: 'rate' },
    // 500 answers planned over 5 s, measured over 5.1 s (the generator's next sample): 100 %, not 98 %.
    {
      name: 'measured past the planned seconds',
      target: 100,
      c: { seconds: 5.1 },
      base: 3,
      held: true,
      bend: null,
    },
    { name: '99.8 % success', target: 100, c: { successPct: 99.8 }, base: 3, held: false, bend: 'errors' },
    { name: 'p99 under the 25 ms floor', target: 100, c: { p99: 24 }, base: 1, held: true, bend: null },
    { name: 'p99 over 5 × the first', target: 100, c: { p99: 260 }, base: 50, held: false, bend: 'latency' },
    {
      name: 'rate and latency: rate first',
      target: 100,
      c: { rps: 50, p99: 900 },
      base: 3,
      held: false,
      bend: 'rate',
    },
    { name: 'closed loop: no target', target: null, c: { rps: 5 }, base: 3, held: true, bend: null },
  ];
  for (const t of cases) {
    it(t.name, () => {
      const st = stage(1, t.target, t.c, null);
      const hold = holdOf(st, st.direct!, t.base, VERDICT_RULES);
      expect({ held: hold.held, bend: hold.bend }).toEqual({ held: t.held, bend: t.bend });
    });
  }
});

describe('buildVerdict: what saturated first, and where', () => {
  const bent = { rps: 50, p99: 900 };
  const cases: {
    name: string;
    stages: StageReport[];
    extra?: Partial<BenchReport['settings']>;
    saturated: string;
    process: string | null;
    stage: number | null;
    knees: [number | null, number | null];
  }[] = [
    {
      name: 'both held every stage: nothing',
      stages: [stage(1, 100, {}, {}), stage(2, 200, { rps: 200 }, { rps: 200 })],
      saturated: 'none',
      process: null,
      stage: null,
      knees: [2, 2],
    },
    {
      name: 'both bend at the same stage: the backend',
      stages: [stage(1, 100, {}, {}), stage(2, 200, bent, { ...bent, rps: 48 })],
      saturated: 'backend',
      process: 'backend',
      stage: 2,
      knees: [1, 1],
    },
    {
      name: 'direct holds, tunnel bends, agent near a core: the tunnel, in the agent',
      stages: [
        stage(1, 100, {}, {}),
        stage(2, 200, { rps: 200 }, { ...bent, agent: usage(4, 95), edge: usage(30) }),
      ],
      saturated: 'tunnel',
      process: 'agent',
      stage: 2,
      knees: [2, 1],
    },
    {
      name: 'direct holds, tunnel bends, edge near a core: the tunnel, in the edge',
      stages: [
        stage(1, 100, {}, {}),
        stage(2, 200, { rps: 200 }, { ...bent, edge: usage(98), agent: usage(60) }),
      ],
      saturated: 'tunnel',
      process: 'edge',
      stage: 2,
      knees: [2, 1],
    },
    {
      name: 'the busiest thread, not the CPU, places it: an edge thread that never slept beats a busier agent',
      stages: [
        stage(1, 100, {}, {}),
        stage(
          2,
          200,
          { rps: 200 },
          { ...bent, edge: { ...usage(20, 70), busiestThreadPct: 99 }, agent: usage(60) },
        ),
      ],
      saturated: 'tunnel',
      process: 'edge',
      stage: 2,
      knees: [2, 1],
    },
    {
      name: 'a machine so busy that every thread waits: a thread that still sleeps is not saturated',
      stages: [
        stage(1, 100, {}, {}),
        stage(
          2,
          2000,
          { ...bent, generator: { ...usage(10, 150), busiestThreadPct: 60 } },
          { ...bent, generator: { ...usage(10, 150), busiestThreadPct: 60 } },
        ),
      ],
      saturated: 'backend',
      process: 'backend',
      stage: 2,
      knees: [1, 1],
    },
    {
      name: 'every side bends with the generator at a core: the generator',
      stages: [
        stage(1, 100, {}, {}),
        stage(2, 2000, { ...bent, generator: usage(9, 88) }, { ...bent, generator: usage(10, 85) }),
      ],
      saturated: 'generator',
      process: 'generator',
      stage: 2,
      knees: [1, 1],
    },
    {
      name: 'a busy generator while the direct side held is not the generator',
      stages: [
        stage(1, 100, {}, {}),
        stage(2, 200, { rps: 200, generator: usage(95) }, { ...bent, generator: usage(95) }),
      ],
      saturated: 'tunnel',
      process: 'agent',
      stage: 2,
      knees: [2, 1],
    },
    {
      name: 'direct only bends in latency while the tunnel misses its rate: the tunnel',
      stages: [stage(1, 100, {}, {}), stage(2, 200, { rps: 200, p99: 200 }, bent)],
      saturated: 'tunnel',
      process: 'agent',
      stage: 2,
      knees: [1, 1],
    },
    {
      name: 'a spike: the middle stage bends, the knee is the highest held rate',
      stages: [stage(1, 100, {}, {}), stage(2, 1000, bent, bent), stage(3, 100, {}, {})],
      saturated: 'backend',
      process: 'backend',
      stage: 2,
      knees: [3, 3],
    },
    {
      name: 'only the tunnel side, nothing near a core: unknown',
      stages: [stage(1, 100, null, {}), stage(2, 200, null, bent)],
      saturated: 'unknown',
      process: null,
      stage: 2,
      knees: [null, 1],
    },
    {
      name: 'only the tunnel side, the backend near a core: the backend',
      stages: [stage(1, 100, null, {}), stage(2, 200, null, { ...bent, backend: usage(97) })],
      saturated: 'backend',
      process: 'backend',
      stage: 2,
      knees: [null, 1],
    },
    {
      name: 'closed loop: p99 grows past 5 × with the connections: the tunnel',
      stages: [stage(1, null, { p99: 10 }, { p99: 12 }), stage(2, null, { p99: 20 }, { p99: 90 })],
      saturated: 'tunnel',
      process: 'agent',
      stage: 2,
      knees: [2, 1],
    },
  ];
  for (const t of cases) {
    it(t.name, () => {
      const verdict = buildVerdict(input(t.stages, t.extra));
      expect(
        { saturated: verdict.saturated, process: verdict.process, stage: verdict.stage },
        verdict.summary,
      ).toEqual({ saturated: t.saturated, process: t.process, stage: t.stage });
      expect([verdict.knee.direct?.stage ?? null, verdict.knee.tunnel?.stage ?? null]).toEqual(t.knees);
    });
  }

  it('says it in a sentence, with the knees', () => {
    const target = { backend: null };
    const stages = [
      stage(1, 100, target, target),
      stage(2, 200, { ...bent, ...target }, { ...bent, ...target }),
    ];
    const verdict = buildVerdict(input(stages, { targetUrl: 'http://x/' }));
    expect(verdict.summary).toMatch(
      /^The backend saturated first, at stage 2 \(200 RPS\): the direct side bent/,
    );
    expect(verdict.summary).toContain('its CPU is not metered (--target)');
    expect(verdict.summary).toContain('Knee: the direct side held up to stage 1 (100 RPS, 100 RPS achieved)');
    const none = buildVerdict(input([stage(1, 100, {}, {})]));
    expect(none.summary).toMatch(
      /^Nothing saturated up to the last stage, stage 1 \(100 RPS\): every side held every stage\./,
    );
  });

  it('says when the stage that bent met a busy machine, and when the tunnel waited for cores rather than ran', () => {
    const starvedTunnel = { ...bent, busy: 190, edge: usage(10, 60), agent: usage(9, 50) };
    const verdict = buildVerdict(input([stage(1, 100, {}, {}), stage(2, 200, { rps: 200 }, starvedTunnel)]));
    expect(verdict.saturated).toBe('tunnel');
    expect(verdict.stages[1]!.reason).toContain(
      "so other work on the machine, not the tunnel's own limit, set its pace",
    );
    expect(verdict.summary).toContain(
      'The machine was busy at that stage (151 % of a core used outside the run): measure it again on a quieter one',
    );
  });

  it('a bend in latency alone, no process near a core, on a busy machine: not blamed on the backend or the tunnel', () => {
    // Rate and success kept; a p99 of 40 ms against a 25 ms limit while 170 % of a core ran elsewhere.
    const slow = { rps: 200, p99: 40, busy: 190 };
    const direct = buildVerdict(input([stage(1, 100, {}, {}), stage(2, 200, slow, slow)]));
    expect(direct).toMatchObject({ saturated: 'unknown', process: null, stage: 2 });
    expect(direct.stages[1]!.reason).toMatch(/^the direct side bent only in latency \(/);
    expect(direct.stages[1]!.reason).toContain(
      "while 170 % of a core was used outside the run: the machine's other work explains it as well as the backend does",
    );
    expect(direct.summary).toMatch(
      /^Something saturated that the figures cannot place, at stage 2 \(200 RPS\): the direct side bent only/,
    );
    const tunnel = buildVerdict(input([stage(1, 100, {}, {}), stage(2, 200, { rps: 200 }, slow)]));
    expect(tunnel).toMatchObject({ saturated: 'unknown', process: null, stage: 2 });
    expect(tunnel.stages[1]!.reason).toContain('as well as the tunnel does');
    // The same bend on a quiet machine, or with the backend near a core, or a rate missed: named as before.
    const quiet = { rps: 200, p99: 40 };
    expect(buildVerdict(input([stage(1, 100, {}, {}), stage(2, 200, quiet, quiet)])).saturated).toBe(
      'backend',
    );
    const hot = { ...slow, backend: usage(95) };
    expect(buildVerdict(input([stage(1, 100, {}, {}), stage(2, 200, hot, hot)])).saturated).toBe('backend');
    const short = { ...slow, rps: 150 };
    expect(buildVerdict(input([stage(1, 100, {}, {}), stage(2, 200, short, short)])).saturated).toBe(
      'backend',
    );
  });

  it('with --target, a busy machine in the summary may be the target itself: it says so', () => {
    // The target's CPU is outside the run's metered processes: a backend at a core reads as a busy machine.
    const stages = [stage(1, 100, {}, {}), stage(2, 200, { ...bent, backend: null, busy: 120 }, bent)];
    const verdict = buildVerdict(input(stages, { targetUrl: 'http://x/' }));
    expect(verdict.saturated).toBe('backend');
    expect(verdict.summary).toContain(
      'The machine was busy at that stage (110 % of a core used outside the run, your --target included if it runs here)',
    );
    const own = buildVerdict(input([stage(1, 100, {}, {}), stage(2, 200, { ...bent, busy: 120 }, bent)]));
    expect(own.summary).toContain(
      'The machine was busy at that stage (100 % of a core used outside the run):',
    );
  });

  it('a first stage whose p99 noise lifted: the latency limit it sets is said to be loose', () => {
    // The tunnel's first p99 72 ms (a neighbour's burst over 200 answers), 5.4 ms at stage 2: a 362 ms limit.
    const stages = [
      stage(1, 50, {}, { p99: 72.3 }),
      stage(2, 200, { rps: 200 }, { rps: 200, p99: 5.4 }),
      stage(3, 400, { rps: 400 }, { rps: 400, p99: 68 }),
    ];
    const verdict = buildVerdict(input(stages));
    expect(verdict.saturated).toBe('none');
    const loose = verdict.warnings.filter((w) => w.kind === 'loose-baseline');
    expect(loose).toEqual([
      {
        kind: 'loose-baseline',
        stages: [1],
        text:
          "the tunnel side's first-stage p99 (72 ms) is 13.4× its lowest later one (5.4 ms at stage 2): " +
          'the latency limit it sets (362 ms) is 13.4× the 27 ms that one would set, so a later bend in latency ' +
          'alone can pass unseen; a longer first stage, or one at a lower rate, sets a truer limit',
      },
    ]);
    // A limit within twice the one the lowest later p99 sets (40 ms against 25), or the floor anyway: none.
    const steady = [stage(1, 100, {}, { p99: 8 }), stage(2, 200, { rps: 200 }, { rps: 200, p99: 1.9 })];
    expect(buildVerdict(input(steady)).warnings.map((w) => w.kind)).not.toContain('loose-baseline');
    const floor = [stage(1, 100, {}, { p99: 4 }), stage(2, 200, { rps: 200 }, { rps: 200, p99: 1 })];
    expect(buildVerdict(input(floor)).warnings.map((w) => w.kind)).not.toContain('loose-baseline');
  });

  it('a backend that waits rather than computes is said to', () => {
    const verdict = buildVerdict(
      input([stage(1, 100, {}, {}), stage(2, 200, { ...bent, backend: usage(3) }, bent)]),
    );
    expect(verdict.stages[1]!.reason).toContain('it waits rather than computes');
    // One that waited for a core more than it ran did not sleep: the machine's other work held it back.
    const starved = buildVerdict(
      input([stage(1, 100, {}, {}), stage(2, 200, { ...bent, backend: usage(3, 45) }, bent)]),
    );
    expect(starved.stages[1]!.reason).not.toContain('it waits rather than computes');
    expect(starved.stages[1]!.reason).toContain(
      "backend CPU 3 %, run-queue wait 45 % of a core, mostly waiting for a core other work held: other work on the machine, not the backend's own limit, set its pace",
    );
  });
});
