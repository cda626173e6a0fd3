/**
 * The edge's log line for a person at a terminal: `time level message key=value...`, one line per event,
 * the columns aligned, the fields that tell requests and tunnels apart first. It formats what pino wrote
 * (its JSON, redacted already), so nothing reaches the terminal that the JSON log would not carry.
 */
export interface HumanLineStyle {
  /** ANSI colours (a terminal that shows them, NO_COLOR unset). */
  colour: boolean;
  /** Error stacks under the line (debug and trace levels only: a stack is for whoever debugs). */
  stacks: boolean;
}

const levelNames: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};

const RESET = '\x1b[0m';
const DIM = '\x1b[2m';
const BOLD = '\x1b[1m';
const levelColours: Record<number, string> = {
  10: '\x1b[90m',
  20: '\x1b[36m',
  30: '\x1b[32m',
  40: '\x1b[33m',
  50: '\x1b[31m',
  60: '\x1b[41m\x1b[97m',
};

/** Messages are padded to this width so that the fields after them start in one column. */
const MESSAGE_WIDTH = 26;
/** Longest a value is shown; a config object or a long URL is cut (the JSON format has it whole). */
const MAX_VALUE_CHARS = 160;

/** Fields shown first, in this order: what tells one request or tunnel from another. */
const leadingKeys = ['requestId', 'session', 'method', 'url', 'status', 'durationMs', 'code'];
/** pino's own fields and bindings a person does not need on every line. */
const hiddenKeys = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'component', 'epoch', 'reqId', 'v']);

export function formatHumanLine(record: Record<string, unknown>, style: HumanLineStyle): string {
  const level = typeof record.level === 'number' ? record.level : 30;
  const paint = (code: string, text: string): string => (style.colour ? `${code}${text}${RESET}` : text);
  const levelName = (levelNames[level] ?? String(level)).padEnd(5);
  const message = typeof record.msg === 'string' ? printable(record.msg) : '';
  const fields: string[] = [];
  const err = errorOf(record.err);
  for (const key of leadingKeys) {
    if (key === 'code' && err?.code !== undefined) continue;
    if (record[key] !== undefined) fields.push(field(key, record[key], paint));
  }
  for (const [key, value] of Object.entries(record)) {
    if (value === undefined || hiddenKeys.has(key) || leadingKeys.includes(key) || key === 'err') continue;
    fields.push(field(key, value, paint));
  }
  if (err !== undefined) {
    if (err.code !== undefined) fields.push(field('code', err.code, paint));
    fields.push(field('error', err.message, paint));
  }
  const head = `${paint(DIM, clock(record.time))} ${paint(levelColours[level] ?? '', levelName)} `;
  const padded = fields.length === 0 ? message : message.padEnd(MESSAGE_WIDTH);
  const text = `${level >= 50 ? paint(BOLD, padded) : padded} ${fields.join(' ')}`;
  const line = `${head}${text}`.trimEnd();
  const stack = style.stacks && err?.stack !== undefined ? `\n${indent(err.stack)}` : '';
  return `${line}${stack}\n`;
}

function field(key: string, value: unknown, paint: (code: string, text: string) => string): string {
  return `${paint(DIM, `${printable(key)}=`)}${shown(value)}`;
}

/** A value as one token: bare when it has no spaces, quoted (JSON) otherwise; objects compact JSON. */
function shown(value: unknown): string {
  let text: string;
  if (typeof value === 'string') text = /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  else if (typeof value === 'number' || typeof value === 'boolean') text = String(value);
  else text = JSON.stringify(value) ?? String(value);
  text = printable(text);
  return text.length > MAX_VALUE_CHARS ? `${text.slice(0, MAX_VALUE_CHARS - 1)}…` : text;
}

/**
 * Characters that act on a terminal rather than show: C0 and C1 controls (ESC starts a sequence that moves
 * the cursor or retitles the window, \u009b is CSI itself on a terminal reading 8-bit controls), the
 * Unicode line separators and the bidi overrides that reorder what follows. They come from peers (a URL, a
 * header repeated in an error message, an agent's HELLO), so they are shown as `\uXXXX` wherever they
 * are: the message, a field's name or its value.
 */
const unprintable = /[\p{Cc}\u2028\u2029\u202a-\u202e\u2066-\u2069]/gu;

function printable(text: string): string {
  return text.replace(unprintable, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

interface ShownError {
  code: string | undefined;
  message: string;
  stack: string | undefined;
}

/** pino's error serialiser writes `{ type, message, stack, code?, ... }`. */
function errorOf(value: unknown): ShownError | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const err = value as { message?: unknown; stack?: unknown; code?: unknown; type?: unknown };
  const message = typeof err.message === 'string' && err.message !== '' ? err.message : String(err.type);
  return {
    code: typeof err.code === 'string' || typeof err.code === 'number' ? String(err.code) : undefined,
    message,
    stack: typeof err.stack === 'string' ? err.stack : undefined,
  };
}

/** The local wall-clock time, to the millisecond: a terminal session reads in its own time zone. */
function clock(time: unknown): string {
  const date = typeof time === 'string' || typeof time === 'number' ? new Date(time) : new Date();
  const at = Number.isNaN(date.getTime()) ? new Date() : date;
  const two = (n: number): string => String(n).padStart(2, '0');
  return `${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}.${String(at.getMilliseconds()).padStart(3, '0')}`;
}

function indent(stack: string): string {
  return stack
    .split('\n')
    .map((line) => `    ${printable(line)}`)
    .join('\n');
}
