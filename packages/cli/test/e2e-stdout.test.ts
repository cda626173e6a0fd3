import { type ChildProcess, spawn } from 'node:child_process';
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
async function load(name: string, count: number, concurrency = 8): Promise<number[]> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const statuses: number[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      next++;
      const res = await send({
        port,
        path: '/loadtest/ping',
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
    ['in a worker (stdout a pipe)', {}],
    ['on the main thread (TUNNEL2_WORKER=0)', { TUNNEL2_WORKER: '0' }],
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
    ['in a worker (stdout a pipe)', {}],
    ['on the main thread (TUNNEL2_WORKER=0)', { TUNNEL2_WORKER: '0' }],
  ])('--no-tty with its stdout pipe closed, %s: keeps serving, and exits 0 on SIGINT', async (_, env) => {
    const name = `notty${Object.keys(env).length}`;
    const agent = spawn(process.execPath, [cliBin, ...agentArgs(name, '--no-tty')], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanups.push(killed(agent));
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
  it('drops request lines past a bound, and says how many with a `dropped` event once read again', async () => {
    const agent = spawn(process.execPath, [cliBin, ...agentArgs('unread', '--json')], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanups.push(killed(agent));
    const out = agent.stdout!;
    // The ready line, then nothing is read: the pipe and every buffer behind it fill up.
    await new Promise<void>((resolve) => out.once('data', () => resolve()));
    out.pause();
    const requests = 6000;
    expect((await load('unread', requests)).filter((s) => s !== 200)).toEqual([]);
    const events: Record<string, unknown>[] = [];
    let partial = '';
    const counted = () =>
      events.filter((e) => e.event === 'request').length +
      events.filter((e) => e.event === 'dropped').reduce((n, e) => n + Number(e.count), 0);
    const allCounted = new Promise<void>((resolve) => {
      out.on('data', (chunk: Buffer) => {
        const lines = (partial + chunk.toString()).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) events.push(JSON.parse(line) as Record<string, unknown>);
        if (counted() >= requests) resolve();
      });
    });
    out.resume();
    await allCounted;
    // Every request is either a line or counted in a `dropped` event: none is lost silently.
    expect(counted()).toBe(requests);
    const dropped = events.filter((e) => e.event === 'dropped');
    expect(dropped.length).toBeGreaterThan(0);
    expect(dropped[0]).toMatchObject({ event: 'dropped', count: expect.any(Number) });
    expect(typeof dropped[0]!.time).toBe('string');
    expect(agent.exitCode).toBeNull();
  });

  // A reader that is alive but stuck: Node waits for a pending write to a pipe before a process ends, so a
  // stopped agent stayed up for as long as the reader did (SIGTERM under systemd did nothing). The default
  // for a piped stdout is the worker; with TUNNEL2_WORKER=0 (an opt-out kept for measurements) Node writes
  // to the pipe synchronously and a stuck reader stops the whole event loop, which is why the worker exists.
  it('SIGTERM ends an agent whose stdout reader stopped reading', async () => {
    const agent = spawn(process.execPath, [cliBin, ...agentArgs('stuck', '--json')], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanups.push(killed(agent));
    const out = agent.stdout!;
    await new Promise<void>((resolve) => out.once('data', () => resolve()));
    out.pause();
    expect((await load('stuck', 3000)).filter((s) => s !== 200)).toEqual([]);
    const exited = new Promise<number | null>((resolve) => agent.once('exit', (code) => resolve(code)));
    agent.kill('SIGTERM');
    // Before the fix this never resolved while `out` stayed paused; the test's timeout is the bound.
    expect(await exited).toBe(0);
  });
});
