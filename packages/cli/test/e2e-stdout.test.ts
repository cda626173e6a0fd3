import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { Agent } from 'node:http';
import type { Readable } from 'node:stream';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { send } from './support/http-client.js';
import { cliBin } from './support/processes.js';
import { type Backend, silent } from './support/stack.js';

/**
 * Issue #29, 7 and 8: what reads the agent's stdout is not the agent's business. A reader that exits
 * (`tunnel2 http 3000 --json | head -1`, to grab the URL) ended the agent with an unhandled `write EPIPE`;
 * a reader that never reads grew it without bound (0.93 KB per request). The tunnel must keep serving,
 * and the lines it cannot write are dropped, counted, and the count said when stdout drains again.
 */
const CLOSED_LINE =
  /^tunnel2: stdout was closed \(EPIPE\); no more lines are written there, the tunnel keeps serving$/m;

let backend: Backend;
let edge: Edge;
let port: number;
beforeAll(async () => {
  backend = await createTestBackend();
  edge = buildEdge({ port: 0, logger: silent });
  ({ port } = await edge.listen());
});
afterAll(async () => {
  await edge.close(0);
  await backend.close();
});
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Collects a stream's text; `waitFor` resolves when it matches (bounded by the test timeout). */
function collect(stream: Readable): { text: () => string; waitFor: (pattern: RegExp) => Promise<void> } {
  let text = '';
  const waiters: { pattern: RegExp; resolve: () => void }[] = [];
  stream.on('data', (chunk: Buffer) => {
    text += chunk.toString();
    for (const w of waiters.filter((w) => w.pattern.test(text))) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
  });
  return {
    text: () => text,
    waitFor: (pattern) =>
      pattern.test(text) ? Promise.resolve() : new Promise((resolve) => waiters.push({ pattern, resolve })),
  };
}

/** `count` GETs through the tunnel named `name`, `concurrency` at a time on kept-alive connections; their statuses. */
async function load(
  name: string,
  count: number,
  concurrency = 8,
  path = '/loadtest/ping',
): Promise<number[]> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const statuses: number[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      next++;
      const res = await send({
        port,
        path,
        headers: ['Host', `${name}.localhost:${port}`],
        agent,
        keepBody: false,
      });
      statuses.push(res.status);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  agent.destroy();
  return statuses;
}

function agentArgs(name: string, ...flags: string[]): string[] {
  return ['http', String(backend.port), '--server', edge.url, '--subdomain', name, ...flags];
}

/** An agent with stdout and stderr pipes to this process, `env` added to ours; killed after the test. */
function spawnAgent(env: Record<string, string>, name: string, ...flags: string[]): ChildProcess {
  const agent = spawn(process.execPath, [cliBin, ...agentArgs(name, ...flags)], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  cleanups.push(killed(agent));
  return agent;
}

/** Kills the agent, or (`group`) the shell's whole pipeline: the agent may outlive the shell's exit. */
function killed(child: ChildProcess, group = false): () => void {
  return () => {
    if (child.pid === undefined) return;
    try {
      process.kill(group ? -child.pid : child.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  };
}

/**
 * The names of a process's threads (Linux): a worker_threads Worker is `WorkerThread`. An agent whose stdout is
 * a pipe runs on the main thread (bin/tunnel2.js); `TUNNEL2_WORKER=1` puts the tunnel in a worker.
 */
function threadNames(pid: number): string[] {
  return readdirSync(`/proc/${pid}/task`).map((task) => {
    try {
      return readFileSync(`/proc/${pid}/task/${task}/comm`, 'utf8').trim();
    } catch {
      return ''; // A thread that ended meanwhile.
    }
  });
}

/** Each way the tunnel may run with a piped stdout: the default (main thread) and the worker (TUNNEL2_WORKER=1). */
const THREADINGS = [
  ['on the main thread (the default for a piped stdout)', {}, false],
  ['in a worker (TUNNEL2_WORKER=1)', { TUNNEL2_WORKER: '1' }, true],
] as const;

/** JSON lines read from a stream as they come. */
function jsonLines(stream: Readable): { events: Record<string, unknown>[]; bytes: () => number } {
  const events: Record<string, unknown>[] = [];
  let partial = '';
  let bytes = 0;
  stream.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
    const lines = (partial + chunk.toString()).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) events.push(JSON.parse(line) as Record<string, unknown>);
  });
  return { events, bytes: () => bytes };
}

describe('a stdout whose reader went away', () => {
  it('`tunnel2 http --json | head -1`: the tunnel keeps serving after head exits, with one line on stderr', async () => {
    // A process group of its own: the agent inside the shell's pipeline is killed with it at the end.
    const shell = spawn(
      'sh',
      ['-c', '"$@" | head -1', 'sh', process.execPath, cliBin, ...agentArgs('headjson', '--json')],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      },
    );
    cleanups.push(killed(shell, true));
    const stdout = collect(shell.stdout!);
    const stderr = collect(shell.stderr!);
    await stdout.waitFor(/\n/);
    expect(JSON.parse(stdout.text())).toMatchObject({ event: 'ready' });
    // head has exited: the first request line meets a closed pipe.
    expect(await load('headjson', 1)).toEqual([200]);
    await stderr.waitFor(CLOSED_LINE);
    expect(await load('headjson', 200)).toEqual(Array(200).fill(200));
    expect(stderr.text().match(new RegExp(CLOSED_LINE, 'gm'))).toHaveLength(1);
    expect(stderr.text()).not.toContain('Error');
    expect(shell.exitCode).toBeNull();
  });

  it.each([
    ['on the main thread (stdout a pipe)', {}],
    ['in a worker (TUNNEL2_WORKER=1)', { TUNNEL2_WORKER: '1' }],
  ])(
    '`tunnel2 http --json 2>&1 | head -1` (stderr closed too), %s: the tunnel keeps serving',
    async (_, env) => {
      const name = `headboth${Object.keys(env).length}`;
      const shell = spawn(
        'sh',
        ['-c', '"$@" 2>&1 | head -1', 'sh', process.execPath, cliBin, ...agentArgs(name, '--json')],
        {
          env: { ...process.env, ...env },
          stdio: ['ignore', 'pipe', 'pipe'],
          detached: true,
        },
      );
      cleanups.push(killed(shell, true));
      const stdout = collect(shell.stdout!);
      await stdout.waitFor(/\n/);
      expect(JSON.parse(stdout.text())).toMatchObject({ event: 'ready' });
      // The first request line meets the closed pipe, then the line saying so meets a closed stderr.
      expect(await load(name, 1)).toEqual([200]);
      expect(await load(name, 200)).toEqual(Array(200).fill(200));
      expect(shell.exitCode).toBeNull();
    },
  );

  it.each([
    ['on the main thread (stdout a pipe)', {}],
    ['in a worker (TUNNEL2_WORKER=1)', { TUNNEL2_WORKER: '1' }],
  ])('--no-tty with its stdout pipe closed, %s: keeps serving, and exits 0 on SIGINT', async (_, env) => {
    const name = `notty${Object.keys(env).length}`;
    const agent = spawnAgent(env, name, '--no-tty');
    const stdout = collect(agent.stdout!);
    const stderr = collect(agent.stderr!);
    await stdout.waitFor(/forwarding http:\/\//);
    agent.stdout!.destroy();
    expect(await load(name, 1)).toEqual([200]);
    await stderr.waitFor(CLOSED_LINE);
    expect(await load(name, 200)).toEqual(Array(200).fill(200));
    expect(agent.exitCode).toBeNull();
    const exited = new Promise<number | null>((resolve) => agent.on('exit', resolve));
    agent.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(stderr.text().match(new RegExp(CLOSED_LINE, 'gm'))).toHaveLength(1);
    expect(stderr.text()).toMatch(/tunnel2: closed\n$/);
  });
});

describe('a stdout that is not read', () => {
  it.each(THREADINGS)(
    '%s: the tunnel serves every request while the pipe is full; what waits for the reader is bounded, and the reader then gets a `dropped` count and the closing events',
    async (_, env, inWorker) => {
      const name = `unread${inWorker ? 'w' : 'm'}`;
      const agent = spawnAgent(env, name, '--json');
      const out = agent.stdout!;
      // The ready line, then nothing is read: the pipe and every buffer behind it fill up.
      await new Promise<void>((resolve) => out.once('data', () => resolve()));
      out.pause();
      expect(threadNames(agent.pid!).includes('WorkerThread')).toBe(inWorker);
      const requests = 4000;
      // A long query makes each request line ~1 KB: 4 MB of lines, many times what may wait for the reader.
      const path = `/loadtest/ping?${'q'.repeat(900)}`;
      // A tunnel whose event loop waited on the pipe would leave these unanswered (the test's timeout).
      expect((await load(name, requests, 8, path)).filter((s) => s !== 200)).toEqual([]);
      const read = jsonLines(out);
      const counted = () =>
        read.events.filter((e) => e.event === 'request').length +
        read.events.filter((e) => e.event === 'dropped').reduce((n, e) => n + Number(e.count), 0);
      const allCounted = new Promise<void>((resolve) => {
        out.on('data', () => {
          if (counted() >= requests) resolve();
        });
      });
      // What the agent and the kernel held for the reader: everything before the first `dropped` event.
      let heldBytes = 0;
      out.on('data', () => {
        if (heldBytes === 0 && read.events.some((e) => e.event === 'dropped')) heldBytes = read.bytes();
      });
      out.resume();
      await allCounted;
      // Every request is either a line or counted in a `dropped` event: none is lost silently.
      expect(counted()).toBe(requests);
      const dropped = read.events.filter((e) => e.event === 'dropped');
      expect(dropped.length).toBeGreaterThan(0);
      expect(dropped[0]).toMatchObject({ event: 'dropped', count: expect.any(Number) });
      expect(typeof dropped[0]!.time).toBe('string');
      // What waited is the line writer's bounds (64 KiB of request lines, 64 KiB of the others), a batch in
      // Node's queue and the socket's kernel buffer: not the 4 MB of lines the requests made.
      expect(heldBytes).toBeLessThan(1024 * 1024);
      expect(String(read.events.find((e) => e.event === 'request')?.path).length).toBeGreaterThan(900);
      expect(agent.exitCode).toBeNull();
      // Lifecycle events reach a reader that reads again.
      const exited = new Promise<number | null>((resolve) => agent.once('exit', (code) => resolve(code)));
      agent.kill('SIGTERM');
      expect(await exited).toBe(0);
      await new Promise<void>((resolve) => (out.readableEnded ? resolve() : out.once('end', resolve)));
      expect(read.events.at(-1)).toMatchObject({ event: 'closed' });
    },
  );

  // A reader that is alive but stuck: Node waits for a pending write to a pipe before a process ends, so a
  // stopped agent stayed up for as long as the reader did (SIGTERM under systemd did nothing).
  it.each(THREADINGS)(
    '%s: SIGTERM ends an agent whose stdout reader stopped reading',
    async (_, env, inWorker) => {
      const name = `stuck${inWorker ? 'w' : 'm'}`;
      const agent = spawnAgent(env, name, '--json');
      const out = agent.stdout!;
      await new Promise<void>((resolve) => out.once('data', () => resolve()));
      out.pause();
      expect((await load(name, 3000)).filter((s) => s !== 200)).toEqual([]);
      const exited = new Promise<number | null>((resolve) => agent.once('exit', (code) => resolve(code)));
      agent.kill('SIGTERM');
      // Before the fix this never resolved while `out` stayed paused; the test's timeout is the bound.
      expect(await exited).toBe(0);
    },
  );
});

describe('the last lines before an exit', () => {
  it.each(THREADINGS)(
    '%s: the request lines of requests answered just before SIGTERM reach the reader, before `closed`',
    async (_, env, inWorker) => {
      const name = `lastlines${inWorker ? 'w' : 'm'}`;
      const agent = spawnAgent(env, name, '--json');
      const read = jsonLines(agent.stdout!);
      await new Promise<void>((resolve) => agent.stdout!.once('data', () => resolve()));
      expect(await load(name, 40)).toEqual(Array(40).fill(200));
      // At once: the lines are still in the line writer's batch (up to 50 ms).
      agent.kill('SIGTERM');
      await new Promise<void>((resolve) => agent.stdout!.once('end', resolve));
      expect(read.events.filter((e) => e.event === 'request')).toHaveLength(40);
      expect(read.events.at(-1)).toMatchObject({ event: 'closed' });
    },
  );

  it('on the main thread, an exit from elsewhere (process.exit) still writes the batched request lines', async () => {
    // Something other than the command's own end exits the process: a preload exits on SIGUSR2.
    const exitOnSignal = `data:text/javascript,${encodeURIComponent(
      "process.on('SIGUSR2', () => process.exit(3));",
    )}`;
    const agent = spawn(
      process.execPath,
      ['--import', exitOnSignal, cliBin, ...agentArgs('exitlines', '--json')],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    cleanups.push(killed(agent));
    const read = jsonLines(agent.stdout!);
    await new Promise<void>((resolve) => agent.stdout!.once('data', () => resolve()));
    expect(await load('exitlines', 40)).toEqual(Array(40).fill(200));
    const exited = new Promise<number | null>((resolve) => agent.once('exit', (code) => resolve(code)));
    agent.kill('SIGUSR2');
    expect(await exited).toBe(3);
    await new Promise<void>((resolve) =>
      agent.stdout!.readableEnded ? resolve() : agent.stdout!.once('end', resolve),
    );
    expect(read.events.filter((e) => e.event === 'request')).toHaveLength(40);
  });
});

describe('a stderr that is not read', () => {
  // The diagnostic log (pino, on fd 2) buffers what stderr does not take, and on the main thread flushes it
  // at exit by retrying every 100 ms until stderr takes it all: a reader of stderr that stopped reading kept
  // a SIGTERMed agent up for as long as it did. With a piped stdout the agent ran in a worker before, where
  // pino does not flush at exit; on the main thread (the default now) it does.
  it.each(THREADINGS)(
    '%s: the tunnel serves while its debug log fills stderr, what waits for stderr is bounded, and SIGTERM still ends it',
    async (_, env, inWorker) => {
      const name = `stuckerr${inWorker ? 'w' : 'm'}`;
      const agent = spawnAgent(env, name, '--json', '--log-level', 'debug');
      agent.stdout!.resume();
      const err = agent.stderr!;
      err.pause();
      await new Promise<void>((resolve) => agent.stdout!.once('data', () => resolve()));
      // Two debug lines of ~250 bytes per request: ~1.5 MB, many times what the socket between us holds.
      expect((await load(name, 3000)).filter((s) => s !== 200)).toEqual([]);
      if (!inWorker) {
        // What the agent held for stderr is bounded: read again, the log says how many lines it dropped.
        const text = collect(err);
        err.resume();
        await text.waitFor(/^tunnel2: \d+ log lines dropped while stderr was not read$/m);
        expect(text.text().length).toBeLessThan(1024 * 1024);
        err.pause();
        // The debug lines of more requests fill it again.
        expect((await load(name, 3000)).filter((s) => s !== 200)).toEqual([]);
      }
      const exited = new Promise<number | null>((resolve) => agent.once('exit', (code) => resolve(code)));
      agent.kill('SIGTERM');
      // The test's timeout is the bound: before, this waited for a reader of stderr that never came.
      expect(await exited).toBe(0);
    },
  );
});
