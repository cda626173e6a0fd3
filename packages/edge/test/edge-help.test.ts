import { describe, expect, it } from 'vitest';
import { runEdgeCommand } from '../src/edge-server.js';
import { edgeSettingSpecs, envOf, flagOf, settingKeys } from '../src/settings/edge-config.js';
import { edgeHelp, helpGroupOf, helpWidth, wrap } from '../src/settings/edge-help.js';
import { humanBytes, humanDuration } from '../src/settings/human-units.js';

/** Runs the whole command as the bins do, capturing its output. */
async function run(argv: string[], env: NodeJS.ProcessEnv = {}, columns?: number) {
  let stdout = '';
  let stderr = '';
  const code = await runEdgeCommand({
    argv,
    env,
    command: 'tunnel2 server',
    version: '0.0.0-test',
    ...(columns === undefined ? {} : { columns }),
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    onShutdownSignal: () => () => {},
  });
  return { code, stdout, stderr };
}

const headings = [
  'Options:',
  'Listening:',
  'Domains and TLS:',
  'Agents and tokens:',
  'Limits:',
  'TCP tunnels:',
  'Cluster (several edges, a Redis registry):',
  'Protocol tuning:',
  'Operations and logs:',
];

describe('human units', () => {
  it('durations in the largest whole unit, sizes in binary units', () => {
    expect(humanDuration(60_000)).toBe('60 s');
    expect(humanDuration(300_000)).toBe('5 min');
    expect(humanDuration(30 * 86_400_000)).toBe('30 days');
    expect(humanDuration(24 * 3_600_000)).toBe('24 h');
    expect(humanDuration(1_500)).toBe('1.5 s');
    expect(humanDuration(100)).toBe('100 ms');
    expect(humanDuration(0)).toBe('0');
    expect(humanBytes(16 * 1024 * 1024)).toBe('16 MiB');
    expect(humanBytes(8 * 1024 ** 3)).toBe('8 GiB');
    expect(humanBytes(16 * 1024 * 1024 - 1)).toBe('16 MiB - 1 B');
    expect(humanBytes(0x7f_ff_ff_ff)).toBe('2 GiB - 1 B');
    expect(humanBytes(1536)).toBe('1.5 KiB');
    expect(humanBytes(100)).toBe('100 B');
  });
});

describe('tunnel2 server --help', () => {
  it('groups every setting under one heading, in order, with its flag and variable', async () => {
    const { code, stdout } = await run(['--help']);
    expect(code).toBe(0);
    const lines = stdout.split('\n');
    const positions = headings.map((heading) => lines.indexOf(heading));
    expect(positions.every((at) => at > 0)).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    for (const key of settingKeys) {
      // The setting's line sits below its group's heading and above the next one.
      const at = lines.findIndex((line) => new RegExp(`^ {2}(-\\w, )?--${flagOf(key)}( |$)`).test(line));
      expect({ key, found: at > 0 }).toEqual({ key, found: true });
      const heading = lines.slice(0, at).findLast((line) => headings.includes(line));
      expect({ key, heading }).toEqual({ key, heading: `${helpGroupOf(key)}:` });
      expect(stdout).toContain(envOf(key));
    }
  });

  it('says defaults and bounds in human units', async () => {
    const { stdout } = await run(['--help'], {}, 200);
    const detail = (flag: string): string => {
      const lines = stdout.split('\n');
      const at = lines.findIndex((line) => line.includes(`--${flag} `) || line.endsWith(`--${flag}`));
      return lines.slice(at, at + 4).join(' ');
    };
    expect(detail('response-timeout-ms')).toContain(
      '(default 60 s; env TUNNEL2_RESPONSE_TIMEOUT_MS; 1 ms to 60 min)',
    );
    expect(detail('startup-grace-ms')).toContain('default 30 s;');
    expect(detail('request-timeout-ms')).toContain('default 5 min;');
    expect(detail('max-request-body-bytes')).toContain('default 8 GiB;');
    expect(detail('initial-session-window')).toContain('default 16 MiB;');
    expect(detail('max-frame-size')).toContain('16 KiB to 16 MiB - 1 B');
    expect(detail('max-header-bytes')).toMatch(/--max-header-bytes <bytes>/);
    expect(detail('drain-timeout-ms')).toMatch(/--drain-timeout-ms <ms>/);
    // No raw millisecond or byte default is left.
    expect(stdout).not.toMatch(/default (60000|16777216|8589934592)\b/);
    expect(stdout.length).toBeGreaterThan(edgeSettingSpecs.port.description.length);
  });

  it('wraps to the terminal (columns), else COLUMNS, else 80', async () => {
    const longest = (text: string): number => Math.max(...text.split('\n').map((line) => line.length));
    expect(longest((await run(['--help'])).stdout)).toBeLessThanOrEqual(80);
    expect(longest((await run(['--help'])).stdout)).toBeGreaterThan(70);
    const narrow = (await run(['--help'], { COLUMNS: '60' })).stdout;
    expect(longest(narrow)).toBeLessThanOrEqual(60);
    const terminal = (await run(['--help'], { COLUMNS: '60' }, 100)).stdout;
    expect(longest(terminal)).toBeLessThanOrEqual(100);
    expect(longest(terminal)).toBeGreaterThan(90);
    // Narrower than two columns can hold: the text goes under its flag, still within the width.
    const tiny = (await run(['--help'], {}, 44)).stdout;
    expect(longest(tiny)).toBeLessThanOrEqual(44);
    expect(tiny).toContain('\n  --response-timeout-ms <ms>\n      a tunnelled request');
    expect(helpWidth(undefined, { COLUMNS: 'wide' })).toBe(80);
    expect(helpWidth(500, {})).toBe(120);
    expect(wrap('a bb ccc dddd', 6)).toEqual(['a bb', 'ccc', 'dddd']);
    expect(edgeHelp('x', 80)).toBe((await run(['--help'])).stdout.replace('tunnel2 server', 'x'));
  });
});

describe('tunnel2 server usage errors', () => {
  it('exit 2 with what is wrong, the usage line and where the help is', async () => {
    const cases: Array<[string[], string]> = [
      [['--prot', '80'], 'unknown option --prot (did you mean --port?)'],
      [['--log-levl', 'debug'], 'unknown option --log-levl (did you mean --log-level?)'],
      [['--frobnicate'], 'unknown option --frobnicate'],
      [['--port'], 'option --port needs a value'],
      [['-p'], 'option -p needs a value'],
      [['--port', '--host', '0.0.0.0'], 'option --port needs a value'],
      [['8080'], 'unexpected argument "8080"'],
      [['--json=yes'], 'option --json takes no value (--json, or --no-json)'],
    ];
    for (const [argv, problem] of cases) {
      const result = await run(argv);
      expect({ argv, ...result }).toEqual({
        argv,
        code: 2,
        stdout: '',
        stderr: `tunnel2 server: ${problem}\nusage: tunnel2 server [options]\nsee tunnel2 server --help\n`,
      });
    }
  });

  it('a value out of range is not a usage error: exit 1, one line naming the setting', async () => {
    const result = await run(['--port', '70000']);
    expect(result).toEqual({
      code: 1,
      stdout: '',
      stderr: 'tunnel2 server: invalid setting port=70000 (from --port): must be an integer in [0, 65535]\n',
    });
  });
});
