import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { usageError } from '../errors.js';
import { runtime } from '../runtime-paths.js';
import type { InspectMode, ScenarioName, SideName } from './report-schema.js';
import { parseTargetFlags, type RequestShape } from './request-shape.js';
import { isScenarioName, SCENARIOS, STANDALONE_USAGE } from './scenarios.js';

/** The inspector setting a run asks for when it gives none: on, unless BENCH_INSPECT=off. */
export function defaultInspectMode(): InspectMode {
  return process.env.BENCH_INSPECT === 'off' ? 'off' : 'on';
}

/** Everything a run needs, validated. */
export interface BenchOptions {
  scenario: ScenarioName;
  /** Fixed-rate scenarios: the target rate of each stage. Empty for max. */
  rates: number[];
  /** max: the connection counts, one stage each. Fixed-rate scenarios: one fixed count, or empty for auto. */
  connections: number[];
  durationSec: number;
  warmupSec: number;
  timeoutSec: number;
  path: string;
  outDir: string;
  sides: SideName[];
  /** The agent's request inspector on the tunnel side; `both` adds a side with it off. */
  inspect: InspectMode;
  /** Agents serving the tunnel's name as replicas (`tunnel2 http --replica`), each with its own backend. */
  replicas: number;
  failUnderPct: number | null;
  maxP99Ms: number | null;
  /** --target: the user's service (the direct side, and what the kit's agent forwards to); null: the test backend. */
  targetUrl: string | null;
  /** --tunnel-url: an existing tunnel's public URL (no edge or agent started); null: the kit starts them. */
  tunnelUrl: string | null;
  /** Method, paths, headers, body and expected status of every request. `path` is `request.paths[0]`. */
  request: RequestShape;
  /**
   * --edge-workers: the whole run once per count, the kit's edge started with `--workers <n>` (one report
   * each, in `<out>/workers-<n>`); null: one run, the edge's default (one process).
   */
  edgeWorkers: number[] | null;
}

export type ParsedCommand = { help: true } | { help: false; options: BenchOptions };

export const USAGE = `usage: ${runtime.command} <scenario> [flags]

Starts a test backend, an edge and an agent on loopback (each its own process), measures the backend
directly and through the tunnel, stage by stage, and writes report.json, report.md and report.html.
With --target, your service is the backend (no test backend starts); with --tunnel-url, an existing
tunnel is the tunnel side (no edge or agent starts).

scenarios:
  ramp       fixed-rate stages, one after the other   --stages 20,50,100,200,500,1000 --duration 30
  spike      2-minute runs at fixed rates             --rates 600,800,900,1000 --duration 120
  constant   N minutes at one fixed rate              --rate 300 --minutes 5
  max        closed loop: as fast as answers come     --connections 50,100 --duration 30
  compare    two runs' reports side by side: ${runtime.command} compare <base> <head> [--max-regress <pct>]
${runtime.standalone ? STANDALONE_USAGE.slice(1) : ''}
flags:
  --stages <rps,...>     ramp: target rate of each stage
  --rates <rps,...>      spike: target rate of each run
  --rate <rps>           constant: the target rate
  --minutes <n>          constant: length of the run (fractions allowed)
  --duration <s>         seconds per stage (constant: instead of --minutes)
  --edge-workers <n,...> the whole run once per count, the kit's edge with --workers <n> (tunnel2 server
                         --workers): reports in <out>/workers-<n>, and the figures side by side at the end
  --warmup <s>           seconds of discarded load before the first stage of each side (default: each
                         stage gets its own, 10 % of its length, 1-10 s, left out of every figure)
  --connections <n,...>  max: connection counts, one stage each (default 50,100);
                         fixed-rate scenarios: connections per stage (default rate/10, at least 1)
  --target <url>         your service: the direct side, and what the kit's own edge + agent tunnel to;
                         a URL, host:port or a port, as tunnel2 http takes it (3000, localhost:3000);
                         its path (if any) is the request path (default: a test backend, /loadtest/get)
  --tunnel-url <url>     an existing tunnel's public URL as the tunnel side (no edge or agent started);
                         without --target only the tunnel side runs
  --method <m>           request method (default GET)
  --path <path,...>      request path; several (repeat, or a comma list: a comma before / separates):
                         each connection cycles through them
  --header 'k: v'        a request header (repeatable); values of auth/cookie/token/key headers are
                         redacted in the reports
  --body-file <file>     request body (at most 8 MiB; set content-type with --header)
  --expect-status <s>    what counts as success: 200, 2xx, or a list (default 2xx); anything else is an
                         error (http_<status>). One request per path and side is checked before the run
  --timeout <s>          request timeout (default 10)
  --only <side>          direct | tunnel: measure one side only
  --inspect <mode>       the agent's request inspector: on (default; BENCH_INSPECT=off makes it off), off,
                         or both: each stage also runs through a second agent with it off, side by side
  --replicas <n>         the tunnel side's name is served by n agents (tunnel2 http --replica), each in front
                         of its own test backend process (default 1); the kit's own stack only
  --out <dir>            where the reports go (default <scenario>-<time> under bench/results in the
                         repository, under ./bench-results from npx @tunnel2/bench)
  --fail-under <pct>     exit 1 if a gated stage's success rate is below pct (gated: the tunnel side's
                         stages, or the only side's with --only)
  --max-p99 <ms>         exit 1 if a gated stage's corrected p99 is above ms
  -h, --help             this text

exit codes: 0 done (and the gate passed), 1 the gate failed, 2 bad flags, 3 the run itself failed.
`;

function positiveNumber(flag: string, text: string, { allowZero = false, integer = false } = {}): number {
  const value = /^\d+(\.\d+)?$/.test(text.trim()) ? Number(text) : Number.NaN;
  const ok =
    Number.isFinite(value) && (allowZero ? value >= 0 : value > 0) && (!integer || Number.isInteger(value));
  if (!ok) {
    const what = integer ? 'a positive integer' : allowZero ? 'a number >= 0' : 'a positive number';
    throw usageError(`${flag} ${JSON.stringify(text)} is not ${what}`);
  }
  return value;
}

function integerList(flag: string, text: string): number[] {
  const items = text.split(',').map((item) => item.trim());
  if (items.some((item) => !/^\d+$/.test(item) || Number(item) === 0)) {
    throw usageError(`${flag} ${JSON.stringify(text)} is not a comma-separated list of positive integers`);
  }
  return items.map(Number);
}

/** Flags each scenario accepts besides the common ones; anything else is refused by name. */
const SCENARIO_FLAGS: Record<ScenarioName, readonly string[]> = {
  ramp: ['stages', 'duration'],
  spike: ['rates', 'duration'],
  constant: ['rate', 'minutes', 'duration'],
  max: ['duration'],
};
const SCENARIO_ONLY_FLAGS = ['stages', 'rates', 'rate', 'minutes', 'duration'];

/**
 * Parses `<scenario> [flags]`. Throws a BenchError (USAGE) with one line naming the offending flag.
 * @param cwd the directory relative --out paths are resolved from (where the user ran pnpm).
 * @param defaultOutRoot where reports go when --out is not given.
 */
export function parseBenchArgs(
  argv: string[],
  cwd: string,
  defaultOutRoot: string,
  now: Date = new Date(),
): ParsedCommand {
  // `pnpm bench -- ramp` hands the separator through; it carries no meaning here.
  const args = argv[0] === '--' ? argv.slice(1) : argv;
  for (const arg of args) {
    const name = arg.startsWith('--') ? arg.slice(2).split('=')[0]! : undefined;
    if (name !== undefined && name !== '' && !(name in OPTIONS)) {
      throw usageError(`unknown flag --${name}`);
    }
  }
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(args);
  } catch (err) {
    // parseArgs names the flag in its message; its codes say which mistake it was.
    throw usageError((err as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help === true) return { help: true };
  const [scenario, ...extra] = positionals;
  if (scenario === undefined)
    throw usageError(`missing scenario: one of ${Object.keys(SCENARIOS).join(', ')}`);
  if (!isScenarioName(scenario)) {
    throw usageError(`unknown scenario "${scenario}": one of ${Object.keys(SCENARIOS).join(', ')}`);
  }
  if (extra.length > 0) throw usageError(`unexpected argument "${extra[0]}" (flags start with --)`);
  for (const flag of SCENARIO_ONLY_FLAGS) {
    if (values[flag as keyof typeof values] !== undefined && !SCENARIO_FLAGS[scenario].includes(flag)) {
      const accepted = SCENARIO_FLAGS[scenario].map((f) => `--${f}`).join(', ');
      throw usageError(`--${flag} does not apply to ${scenario} (it takes ${accepted})`);
    }
  }
  const defaults = SCENARIOS[scenario];

  let durationSec = defaults.durationSec;
  if (values.duration !== undefined) durationSec = positiveNumber('--duration', values.duration);
  if (values.minutes !== undefined) {
    if (values.duration !== undefined)
      throw usageError('--minutes and --duration both set the length: give one');
    durationSec = positiveNumber('--minutes', values.minutes) * 60;
  }

  let rates: number[] = [];
  if (scenario === 'ramp')
    rates = values.stages === undefined ? defaults.rates : integerList('--stages', values.stages);
  if (scenario === 'spike')
    rates = values.rates === undefined ? defaults.rates : integerList('--rates', values.rates);
  if (scenario === 'constant') {
    rates =
      values.rate === undefined ? defaults.rates : [positiveNumber('--rate', values.rate, { integer: true })];
  }

  let connections: number[] = scenario === 'max' ? defaults.connections : [];
  if (values.connections !== undefined) {
    connections = integerList('--connections', values.connections);
    if (scenario !== 'max' && connections.length > 1) {
      throw usageError(`--connections takes one number for ${scenario} (a list is for max)`);
    }
  }

  const timeoutSec = values.timeout === undefined ? 10 : positiveNumber('--timeout', values.timeout);
  // autocannon's own bounds.
  if (timeoutSec < 1 || timeoutSec > 600)
    throw usageError(`--timeout ${values.timeout} must be within 1..600 s`);
  if (connections.length === 1 && scenario !== 'max') {
    // A connection idle for longer than the timeout would be timed out by autocannon between two sends.
    const worst = Math.min(...rates);
    const gapSec = connections[0]! / worst;
    if (gapSec >= timeoutSec) {
      throw usageError(
        `--connections ${connections[0]} at ${worst} RPS leaves ${gapSec} s between sends on a connection; ` +
          `it must be below --timeout (${timeoutSec} s)`,
      );
    }
  }

  const target = values.target === undefined ? undefined : targetUrlOf(values.target);
  const choice = parseTargetFlags({ ...values, target }, (file) => resolve(cwd, file));
  const sides: SideName[] = choice.sides;

  const inspect = values.inspect ?? defaultInspectMode();
  if (inspect !== 'on' && inspect !== 'off' && inspect !== 'both') {
    throw usageError(`--inspect ${JSON.stringify(inspect)} must be on, off or both`);
  }
  if (inspect === 'both' && !sides.includes('tunnel')) {
    throw usageError('--inspect both measures the tunnel side: it cannot go with --only direct');
  }
  if (inspect === 'both' && choice.tunnelUrl !== null) {
    throw usageError('--inspect both starts a second agent: it cannot go with --tunnel-url');
  }

  const replicas =
    values.replicas === undefined ? 1 : positiveNumber('--replicas', values.replicas, { integer: true });
  if (replicas > 8) throw usageError(`--replicas ${replicas}: at most 8 agents on one machine`);
  if (replicas > 1 && (choice.targetUrl !== null || choice.tunnelUrl !== null || inspect === 'both')) {
    throw usageError(
      '--replicas starts its own backends and agents: it cannot go with --target, --tunnel-url or --inspect both',
    );
  }

  let failUnderPct: number | null = null;
  if (values['fail-under'] !== undefined) {
    failUnderPct = positiveNumber('--fail-under', values['fail-under'], { allowZero: true });
    if (failUnderPct > 100) throw usageError(`--fail-under ${values['fail-under']} is above 100 (it is a %)`);
  }
  const maxP99Ms = values['max-p99'] === undefined ? null : positiveNumber('--max-p99', values['max-p99']);

  let edgeWorkers: number[] | null = null;
  if (values['edge-workers'] !== undefined) {
    edgeWorkers = integerList('--edge-workers', values['edge-workers']);
    if (edgeWorkers.some((n) => n > 256)) throw usageError('--edge-workers counts must be within 1..256');
    if (choice.tunnelUrl !== null || !sides.includes('tunnel')) {
      throw usageError(
        "--edge-workers sets the kit's own edge: it needs the tunnel side without --tunnel-url",
      );
    }
  }

  const stamp = now.toISOString().replace(/[:T]/g, '-').replace(/\..*$/, '');
  const outDir =
    values.out === undefined ? resolve(defaultOutRoot, `${scenario}-${stamp}`) : resolve(cwd, values.out);

  return {
    help: false,
    options: {
      scenario,
      rates,
      connections,
      durationSec,
      warmupSec:
        values.warmup === undefined ? 10 : positiveNumber('--warmup', values.warmup, { allowZero: true }),
      timeoutSec,
      path: choice.request.paths[0]!,
      outDir,
      sides,
      inspect,
      replicas,
      failUnderPct,
      maxP99Ms,
      targetUrl: choice.targetUrl,
      tunnelUrl: choice.tunnelUrl,
      request: choice.request,
      edgeWorkers,
    },
  };
}

const OPTIONS = {
  stages: { type: 'string' },
  rates: { type: 'string' },
  rate: { type: 'string' },
  minutes: { type: 'string' },
  duration: { type: 'string' },
  warmup: { type: 'string' },
  connections: { type: 'string' },
  'edge-workers': { type: 'string' },
  path: { type: 'string', multiple: true },
  target: { type: 'string' },
  'tunnel-url': { type: 'string' },
  method: { type: 'string' },
  header: { type: 'string', multiple: true },
  'body-file': { type: 'string' },
  'expect-status': { type: 'string' },
  timeout: { type: 'string' },
  only: { type: 'string' },
  inspect: { type: 'string' },
  replicas: { type: 'string' },
  out: { type: 'string' },
  'fail-under': { type: 'string' },
  'max-p99': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/**
 * `--target` as `tunnel2 http` takes it: a port (`3000`: localhost) or `host:port[/path]` is an http:// URL;
 * anything else is left for the URL check to accept or refuse (with the forms it takes).
 */
export function targetUrlOf(text: string): string {
  const trimmed = text.trim();
  if (/^\d+$/.test(trimmed)) return `http://localhost:${trimmed}`;
  if (/^(\[[0-9a-f:.]+\]|[^:/\s[\]]+):\d+(\/\S*)?$/i.test(trimmed)) return `http://${trimmed}`;
  return text;
}

function parse(args: string[]) {
  return parseArgs({ args, allowPositionals: true, strict: true, options: OPTIONS });
}
