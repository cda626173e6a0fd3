import {
  edgeSettingSpecs,
  envOf,
  flagOf,
  isBooleanSetting,
  type SettingKey,
  settingKeys,
} from './edge-config.js';
import { humanBytes, humanDuration } from './human-units.js';
import type { SettingSpec } from './setting-parsers.js';

/**
 * `tunnel2 server --help`: the settings under headings by concern, each with its default and bounds in
 * human units and its variable, wrapped to the terminal. Generated from the settings table, so it never
 * misses a setting; the compiler makes every new setting choose a heading here.
 */
const groups = [
  ['listening', 'Listening'],
  ['domains', 'Domains and TLS'],
  ['agents', 'Agents and tokens'],
  ['limits', 'Limits'],
  ['tcp', 'TCP tunnels'],
  ['cluster', 'Cluster (several edges, a Redis registry)'],
  ['protocol', 'Protocol tuning'],
  ['operations', 'Operations and logs'],
] as const;
type Group = (typeof groups)[number][0];

/** What a heading says before its settings, when the settings alone would not. */
const groupNotes: Partial<Record<Group, string>> = {
  domains:
    'TLS ends at the edge with --tls-cert and --tls-key (repeated in pairs), or in front of it (a load ' +
    'balancer, a reverse proxy): then give its https:// address as --public-url and its own address to ' +
    '--trust-proxy.',
  cluster: 'Cluster mode needs all three of --registry (Redis), --node-url and --cluster-secret.',
  protocol: 'Defaults suit most edges; bench/README.md has the measurements behind them.',
};

/** The value's name in the usage (`<ms>` and `<bytes>` also say the unit its default is shown in). */
type Placeholder =
  | '<ms>'
  | '<bytes>'
  | '<n>'
  | '<url>'
  | '<address>'
  | '<name>'
  | '<path>'
  | '<file>'
  | '<range>'
  | '<token>'
  | '<secret>'
  | '<level>'
  | '<format>'
  | '<n|auto>';

const settingHelp: { readonly [K in SettingKey]: readonly [Group, Placeholder?] } = {
  port: ['listening', '<n>'],
  host: ['listening', '<address>'],
  domain: ['domains', '<name>'],
  publicUrl: ['domains', '<url>'],
  agentPath: ['agents', '<path>'],
  tlsCert: ['domains', '<file>'],
  tlsKey: ['domains', '<file>'],
  httpPort: ['domains', '<n>'],
  acmeDir: ['domains', '<path>'],
  nodeId: ['cluster', '<name>'],
  registry: ['cluster', '<url>'],
  responseTimeoutMs: ['limits', '<ms>'],
  leaseTtlMs: ['cluster', '<ms>'],
  reconnectGraceMs: ['agents', '<ms>'],
  maxMessageSize: ['protocol', '<bytes>'],
  maxStreamWindow: ['protocol', '<bytes>'],
  sessionWindowBudget: ['protocol', '<bytes>'],
  edgeWindowBudget: ['protocol', '<bytes>'],
  helloTimeoutMs: ['agents', '<ms>'],
  maxSessionsPerOwner: ['agents', '<n>'],
  maxRequestBodyBytes: ['limits', '<bytes>'],
  maxHeaderBytes: ['limits', '<bytes>'],
  maxStreamsPerSession: ['limits', '<n>'],
  streamWaitMs: ['limits', '<ms>'],
  maxWaitingPerSession: ['limits', '<n>'],
  sessionRequestRate: ['limits', '<n>'],
  sessionRequestBurst: ['limits', '<n>'],
  reconnectWaitMs: ['agents', '<ms>'],
  startupGraceMs: ['agents', '<ms>'],
  probeTimeoutMs: ['agents', '<ms>'],
  headersTimeoutMs: ['listening', '<ms>'],
  requestTimeoutMs: ['listening', '<ms>'],
  keepAliveTimeoutMs: ['listening', '<ms>'],
  idleTimeoutMs: ['listening', '<ms>'],
  maxConnectionsPerAddress: ['limits', '<n>'],
  trustProxy: ['domains', '<address>'],
  showSessionCount: ['operations'],
  tcpPorts: ['tcp', '<range>'],
  maxTcpPortsPerOwner: ['tcp', '<n>'],
  nodeUrl: ['cluster', '<url>'],
  clusterSecret: ['cluster', '<secret>'],
  tokens: ['agents', '<token>'],
  tokenFile: ['agents', '<file>'],
  tokenSecret: ['agents', '<secret>'],
  allowAnonymous: ['agents'],
  maxConcurrentStreams: ['protocol', '<n>'],
  maxFrameSize: ['protocol', '<bytes>'],
  initialStreamWindow: ['protocol', '<bytes>'],
  initialSessionWindow: ['protocol', '<bytes>'],
  heartbeatIntervalMs: ['protocol', '<ms>'],
  adminPort: ['operations', '<n>'],
  adminHost: ['operations', '<address>'],
  opsOnPublicPort: ['operations'],
  drainTimeoutMs: ['operations', '<ms>'],
  workers: ['operations', '<n|auto>'],
  logLevel: ['operations', '<level>'],
  logFormat: ['operations', '<format>'],
};

/** The group each setting is listed under (for tests and docs). */
export function helpGroupOf(key: SettingKey): string {
  const group = settingHelp[key][0];
  return groups.find(([id]) => id === group)![1];
}

// Inside a value ("16 MiB - 1 B") spaces do not break a line: they are held as no-break spaces until the
// text is wrapped.
const NBSP = '\u00a0';
const unbreakable = (text: string): string => text.replaceAll(' ', NBSP);

/** A value in the unit its placeholder names. */
function humanValue(value: number, placeholder: Placeholder | undefined): string {
  if (placeholder === '<ms>') return unbreakable(humanDuration(value));
  if (placeholder === '<bytes>') return unbreakable(humanBytes(value));
  return String(value);
}

function humanDefault(key: SettingKey): string | undefined {
  const value: unknown = edgeSettingSpecs[key].default;
  if (value === undefined || (Array.isArray(value) && value.length === 0)) return undefined;
  if (typeof value === 'number') return humanValue(value, settingHelp[key][1]);
  return Array.isArray(value) ? value.join(',') : String(value);
}

/** What a value may be: an integer's bounds in its unit, else the table's words (none for a bare string). */
function humanAllowed(key: SettingKey): string | undefined {
  const spec: SettingSpec<unknown> = edgeSettingSpecs[key];
  if (isBooleanSetting(key)) return undefined;
  if (spec.range !== undefined) {
    const [min, max] = spec.range.map((n) => humanValue(n, settingHelp[key][1]));
    return `${min} to ${max}${spec.allowed.endsWith(', or unset') ? ', or unset' : ''}`;
  }
  return spec.allowed.startsWith('a string') ? undefined : spec.allowed;
}

/** Words of `text` in lines of at most `width` characters (a longer word gets its own line). */
export function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/[ \t\n]+/)) {
    if (word === '') continue;
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') lines.push(line);
  return lines.map((wrapped) => wrapped.replaceAll(NBSP, ' '));
}

/** The width help is wrapped to: the terminal's, else COLUMNS, else 80; within [40, 120] for reading. */
export function helpWidth(columns: number | undefined, env: NodeJS.ProcessEnv): number {
  const fromEnv = Number(env.COLUMNS);
  const width = columns || (Number.isInteger(fromEnv) && fromEnv > 0 ? fromEnv : 80);
  return Math.min(120, Math.max(40, width));
}

/** Rows of (flag, text) in two columns (a longer flag gets a line of its own), or stacked when narrow. */
function layout(rows: Array<[string, string[]]>, width: number, flagColumn: number): string[] {
  const stacked = width - flagColumn < 36;
  const textIndent = stacked ? 6 : flagColumn;
  const out: string[] = [];
  for (const [flag, paragraphs] of rows) {
    const lines = paragraphs.flatMap((paragraph) => wrap(paragraph, width - textIndent));
    const first = `  ${flag}`;
    if (stacked || first.length + 2 > flagColumn) out.push(first);
    else out.push(`${first.padEnd(flagColumn)}${lines.shift() ?? ''}`.trimEnd());
    for (const line of lines) out.push(`${' '.repeat(textIndent)}${line}`);
  }
  return out;
}

export function edgeHelp(command: string, width = 80): string {
  const flagOfSetting = (key: SettingKey): string => {
    const spec = edgeSettingSpecs[key];
    const placeholder = isBooleanSetting(key) ? '' : ` ${settingHelp[key][1] ?? '<value>'}`;
    return `${spec.short === undefined ? '' : `-${spec.short}, `}--${flagOf(key)}${placeholder}`;
  };
  // One flag column for every heading, as wide as most flags need (the few longer get a line of their own).
  const flagColumn = 33;
  const out = [
    `Usage: ${command} [options]`,
    '',
    ...wrap(
      'Runs a tunnel2 edge: one port for agents (WebSocket) and public traffic. Every setting is a flag, a ' +
        'TUNNEL2_* variable and a key of the JSON config file; flag > variable > file > default. Durations ' +
        'are given in milliseconds and sizes in bytes (shown here in larger units).',
      width,
    ),
    '',
    'Options:',
    ...layout(
      [
        ['-c, --config <file>', ['JSON config file (env TUNNEL2_CONFIG)']],
        ['--print-config', ['print the effective configuration (secrets redacted) and exit']],
        ['--json', ['print the listening, draining and stopped events as JSON on stdout']],
        ['-h, --help', ['this help']],
      ],
      width,
      flagColumn,
    ),
  ];
  for (const [group, title] of groups) {
    const keys = settingKeys.filter((key) => settingHelp[key][0] === group);
    if (keys.length === 0) continue;
    out.push('', `${title}:`);
    const note = groupNotes[group];
    if (note !== undefined) out.push(...wrap(note, width - 2).map((line) => `  ${line}`));
    out.push(
      ...layout(
        keys.map((key) => {
          const facts = [humanDefault(key), `env ${envOf(key)}`, humanAllowed(key)];
          const [def, env, allowed] = facts;
          const detail = [def === undefined ? undefined : `default ${def}`, env, allowed]
            .filter((fact) => fact !== undefined)
            .join('; ');
          return [flagOfSetting(key), [edgeSettingSpecs[key].description, `(${detail})`]];
        }),
        width,
        flagColumn,
      ),
    );
  }
  return `${out.join('\n')}\n`;
}
