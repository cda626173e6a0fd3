import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, constants, createReadStream, openSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EdgeError, EdgeErrorCode } from '../src/errors.js';
import { colourWanted, createEdgeLogger, humanLogWanted } from '../src/operations/edge-logger.js';
import { formatHumanLine } from '../src/operations/human-log-line.js';
import { createLogSink } from '../src/operations/log-sink.js';

const ESC = String.fromCharCode(27);
const plain = { colour: false, stacks: false };

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tunnel2-log-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A logger writing to a real file; returns what it wrote once flushed. */
function fileLogger(
  name: string,
  options: Partial<Parameters<typeof createEdgeLogger>[0]>,
): { logger: Logger; read: () => Promise<string> } {
  const path = join(dir, name);
  const fd = openSync(path, 'w');
  const logger = createEdgeLogger({
    level: 'info',
    format: 'pretty',
    fd,
    env: {},
    terminals: { stdout: true, log: true },
    ...options,
  });
  return {
    logger,
    read: async () => {
      await new Promise<void>((resolve) => logger.flush(() => resolve()));
      closeSync(fd);
      return readFileSync(path, 'utf8');
    },
  };
}

describe('the human log line', () => {
  it('is time, level, message, then the fields that tell requests apart, aligned', () => {
    const time = new Date(2026, 0, 2, 3, 4, 5, 67).toISOString();
    const request = formatHumanLine(
      {
        level: 20,
        time,
        pid: 1,
        hostname: 'h',
        component: 'ingress',
        msg: 'request',
        durationMs: 1.5,
        url: '/a b',
        method: 'GET',
        status: 200,
        session: 'brave-fox',
        requestId: 'r-1',
      },
      plain,
    );
    expect(request).toBe(
      '03:04:05.067 DEBUG request                    requestId=r-1 session=brave-fox method=GET url="/a b" status=200 durationMs=1.5\n',
    );
    const connected = formatHumanLine(
      { level: 30, time, msg: 'agent connected', session: 'x', tunnels: 2 },
      plain,
    );
    // The fields start in the same column whatever the message and level.
    expect(connected.indexOf('session=')).toBe(request.indexOf('requestId='));
    expect(formatHumanLine({ level: 30, time, msg: 'stopped' }, plain)).toBe('03:04:05.067 INFO  stopped\n');
  });

  it('shows an error as its code and message, the stack only when asked (debug)', () => {
    const err = {
      type: 'EdgeError',
      message: 'registry down',
      code: 'TUNNEL2_ERR_REGISTRY_UNAVAILABLE',
      stack: 'EdgeError: registry down\n    at claim (x.js:1:1)',
    };
    const record = { level: 50, time: Date.now(), msg: 'registry claim failed', session: 's', err };
    const line = formatHumanLine(record, plain);
    expect(line).toMatch(
      /ERROR registry claim failed +session=s code=TUNNEL2_ERR_REGISTRY_UNAVAILABLE error="registry down"\n$/,
    );
    expect(line.split('\n')).toHaveLength(2);
    const debug = formatHumanLine(record, { colour: false, stacks: true });
    expect(debug).toContain('\n    EdgeError: registry down\n        at claim (x.js:1:1)\n');
  });

  it('never lets a client-chosen value move the cursor, and cuts long values', () => {
    const line = formatHumanLine(
      { level: 30, time: Date.now(), msg: 'm', url: `/x${ESC}[2J\r\n`, config: { a: 'y'.repeat(500) } },
      plain,
    );
    expect(line).not.toContain(ESC);
    expect(line.split('\n')).toHaveLength(2);
    expect(line).toContain('\\u001b[2J\\r\\n');
    expect(line.length).toBeLessThan(400);
  });

  it('never lets a message, a field name or an error type move the cursor or reorder the line either', () => {
    // Fastify logs an error with its message as the line's message, and a message can repeat a header; a
    // logged object's keys and an agent's strings can come from a peer. C1 controls (\u009b is CSI on
    // terminals that read 8-bit controls), bidi overrides and line separators are escaped as in values.
    const hostile = `a${ESC}[2J\r\u009b1m\u202e\u2028b`;
    const line = formatHumanLine(
      {
        level: 50,
        time: Date.now(),
        msg: hostile,
        [hostile]: 1,
        agent: hostile,
        err: { type: hostile, message: '' },
      },
      plain,
    );
    expect(line.split('\n')).toHaveLength(2);
    expect(line.slice(0, -1)).not.toMatch(/[\p{Cc}\u2028\u2029\u202a-\u202e\u2066-\u2069]/u);
    expect(line).toContain('a\\u001b[2J\\r\\u009b1m\\u202e\\u2028b');
  });

  it('is coloured only when asked, bold red for errors', () => {
    const record = { level: 50, time: Date.now(), msg: 'boom' };
    expect(formatHumanLine(record, plain)).not.toContain(ESC);
    expect(formatHumanLine(record, { colour: true, stacks: false })).toContain(`${ESC}[31mERROR`);
  });
});

describe('choosing the format and the colours', () => {
  it('auto is human only when stdout and stderr are both terminals', () => {
    expect(humanLogWanted('auto', { stdout: true, log: true })).toBe(true);
    expect(humanLogWanted('auto', { stdout: false, log: true })).toBe(false);
    expect(humanLogWanted('auto', { stdout: true, log: false })).toBe(false);
    expect(humanLogWanted('pretty', { stdout: false, log: false })).toBe(true);
    expect(humanLogWanted('json', { stdout: true, log: true })).toBe(false);
  });

  it('honours NO_COLOR, FORCE_COLOR and TERM=dumb', () => {
    expect(colourWanted({}, true)).toBe(true);
    expect(colourWanted({}, false)).toBe(false);
    expect(colourWanted({ NO_COLOR: '1' }, true)).toBe(false);
    expect(colourWanted({ NO_COLOR: '' }, true)).toBe(true);
    expect(colourWanted({ TERM: 'dumb' }, true)).toBe(false);
    expect(colourWanted({ FORCE_COLOR: '1' }, false)).toBe(true);
    expect(colourWanted({ FORCE_COLOR: '0' }, true)).toBe(false);
    expect(colourWanted({ FORCE_COLOR: '1', NO_COLOR: '1' }, false)).toBe(true);
  });
});

describe('createEdgeLogger', () => {
  it('redacts secrets in human lines as in JSON ones', async () => {
    for (const format of ['pretty', 'json'] as const) {
      const { logger, read } = fileLogger(`redact-${format}.log`, { format });
      logger.info(
        {
          token: 'tok-s3cret',
          headers: { authorization: 'Bearer hdr-s3cret', cookie: 'sid=cookie-s3cret' },
          agent: { tokenSecret: 'nested-s3cret' },
        },
        'agent connected',
      );
      const text = await read();
      expect(text).toContain('agent connected');
      expect(text).toContain('<redacted>');
      expect(text).not.toMatch(/s3cret/);
    }
  });

  it('writes human lines for pretty (colours per NO_COLOR / FORCE_COLOR) and JSON otherwise', async () => {
    const coloured = fileLogger('coloured.log', { env: {} });
    coloured.logger.warn({ session: 'a' }, 'agent session ended');
    expect(await coloured.read()).toMatch(
      new RegExp(`^${ESC}\\[2m\\d\\d:\\d\\d:\\d\\d\\.\\d{3}${ESC}\\[0m ${ESC}\\[33mWARN`),
    );
    const noColour = fileLogger('no-colour.log', { env: { NO_COLOR: '1' } });
    noColour.logger.warn({ session: 'a' }, 'agent session ended');
    expect(await noColour.read()).toMatch(/^\d\d:\d\d:\d\d\.\d{3} WARN {2}agent session ended +session=a\n$/);
    const forced = fileLogger('forced.log', {
      env: { FORCE_COLOR: '1' },
      terminals: { stdout: false, log: false },
    });
    forced.logger.info('x');
    expect(await forced.read()).toContain(ESC);
    const piped = fileLogger('piped.log', { format: 'auto', terminals: { stdout: false, log: true } });
    piped.logger.info({ session: 'a' }, 'agent connected');
    expect(JSON.parse(await piped.read())).toMatchObject({ level: 30, msg: 'agent connected', session: 'a' });
  });

  it('shows an EdgeError code and message, its stack only at debug', async () => {
    const err = new EdgeError(EdgeErrorCode.REGISTRY_UNAVAILABLE, 'the registry does not answer');
    const info = fileLogger('err-info.log', { env: { NO_COLOR: '1' } });
    info.logger.error({ err }, 'registry claim failed');
    const atInfo = await info.read();
    expect(atInfo).toMatch(/code=TUNNEL2_ERR_REGISTRY_UNAVAILABLE error="the registry does not answer"\n$/);
    expect(atInfo).not.toContain('    at ');
    const debug = fileLogger('err-debug.log', { level: 'debug', env: { NO_COLOR: '1' } });
    debug.logger.error({ err }, 'registry claim failed');
    expect(await debug.read()).toMatch(/\n {4}EdgeError: the registry does not answer\n {8}at /);
  });
});

describe('the log sink: a reader that stops reading', () => {
  it('holds a bounded amount, drops and counts the rest, and says so once the reader reads again', async () => {
    const fifo = join(dir, 'stderr.fifo');
    execFileSync('mkfifo', [fifo]);
    // A reader that never reads (so that the writer may open), then the writer: the pipe fills at 64 KiB.
    const idle = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const fd = openSync(fifo, 'w');
    const maxBufferedChars = 16 * 1024;
    const sink = createLogSink({ fd, maxBufferedChars, droppedLine: (n) => `dropped ${n}\n` });
    const line = `${'x'.repeat(1023)}\n`;
    let written = 0;
    // Until the kernel stops taking bytes: each turn, a few lines; the blocked write is on the thread pool.
    while (sink.dropped === 0 && written < 10_000) {
      for (let i = 0; i < 8; i++, written++) sink.write(line);
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    expect(sink.dropped).toBeGreaterThan(0);
    for (let i = 0; i < 5_000; i++) sink.write(line);
    // Five more MiB asked for, nothing more held: what waits is the bound plus the write in flight.
    expect(sink.bufferedChars).toBeLessThanOrEqual(2 * maxBufferedChars + line.length);
    const dropped = sink.dropped;
    expect(dropped).toBeGreaterThanOrEqual(5_000);

    const reader = createReadStream(fifo, { encoding: 'utf8' });
    let text = '';
    reader.on('data', (chunk) => {
      text += String(chunk);
    });
    const flushed = new Promise<void>((resolve) => sink.flush(() => resolve()));
    await flushed;
    sink.write('after\n');
    await new Promise<void>((resolve) => sink.flush(() => resolve()));
    closeSync(fd);
    await once(reader, 'close');
    closeSync(idle);
    const lines = text.split('\n');
    expect(lines.filter((l) => l === line.trimEnd()).length + dropped).toBe(written + 5_000);
    expect(lines.slice(-3)).toEqual([`dropped ${dropped}`, 'after', '']);
  });
});

describe('the log at exit', () => {
  it('a process that exits at once after logging (an uncaught error, process.exit) still writes its lines', async () => {
    // The built logger (pnpm exec tsc -b), as the bins run it.
    const logger = new URL('../dist/operations/edge-logger.js', import.meta.url).href;
    const script = `const { createEdgeLogger } = await import(${JSON.stringify(logger)});
      const logger = createEdgeLogger({ level: 'info', format: 'json' });
      for (let i = 0; i < 1000; i++) logger.info({ i }, 'line');
      process.exit(3);`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const [code] = (await once(child, 'close')) as [number];
    expect(code).toBe(3);
    const lines = stderr.trim().split('\n');
    expect(lines.map((line) => (JSON.parse(line) as { i: number }).i)).toEqual(
      Array.from({ length: 1000 }, (_, i) => i),
    );
  });

  it('a write waiting for a full non-blocking pipe is written too, in order, once the reader reads again', async () => {
    // stderr is a pipe made non-blocking (by Node, as soon as anything touches process.stderr): a write
    // the kernel takes in part waits to be tried again. The process exits meanwhile; the reader reads
    // only once the exit has begun (the child says so on stdout).
    const sinkModule = new URL('../dist/operations/log-sink.js', import.meta.url).href;
    const script = `import { writeSync } from 'node:fs';
      const { createLogSink } = await import(${JSON.stringify(sinkModule)});
      process.on('exit', () => writeSync(1, 'exiting\\n'));
      void process.stderr;
      const sink = createLogSink({ droppedLine: (n) => 'dropped ' + n + '\\n' });
      for (let i = 0; i < 2000; i++) sink.write(i + ' ' + 'x'.repeat(100) + '\\n');
      setTimeout(() => process.exit(0), 100);`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stderr.pause();
    let stderr = '';
    child.stdout.once('data', () => {
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      child.stderr.resume();
    });
    const [code] = (await once(child, 'close')) as [number];
    expect(code).toBe(0);
    const numbers = stderr
      .trim()
      .split('\n')
      .map((line) => Number(line.split(' ')[0]));
    expect(numbers).toEqual(Array.from({ length: 2000 }, (_, i) => i));
  });
});
