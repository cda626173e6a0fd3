// "Restart keeps your name" (the everyday loop): how long after an agent ends the same command has its name
// again, after Ctrl-C (SIGINT: a graceful close frees the name at once) and after a crash (SIGKILL: the name
// stays reserved for the same agent key, which reclaims it at once). Before, both were a 409 for the
// reconnect grace (60 s). One edge and the real CLI, all on loopback; a throwaway XDG_CONFIG_HOME.
//   node bench/scripts/restart-name.ts [rounds=5]
// Build first (`pnpm exec tsc -b`). Most of each figure is the new process's own start.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const rounds = Number(process.argv[2] ?? 5);
const bin = fileURLToPath(new URL('../../packages/cli/bin/tunnel2.js', import.meta.url));
const home = mkdtempSync(join(tmpdir(), 'tunnel2-restart-name-'));
const env = { ...process.env, XDG_CONFIG_HOME: home };

/** Resolves with the first `--json` event named `name` the child prints. */
function firstEvent(child: ChildProcess, name: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const event = JSON.parse(line) as Record<string, unknown>;
      if (event.event === name) resolve(event);
      if (event.event === 'error' && event.fatal === true) reject(new Error(String(event.message)));
    });
  });
}

const edge = spawn(process.execPath, [bin, 'server', '--port', '0', '--json', '--log-level', 'warn'], {
  env,
  stdio: ['ignore', 'pipe', 'inherit'],
});
const url = String((await firstEvent(edge, 'listening')).url);

function agent(): { child: ChildProcess; ready: Promise<Record<string, unknown>>; exited: Promise<unknown> } {
  const child = spawn(
    process.execPath,
    [bin, 'http', '1', '--server', url, '--subdomain', 'restarted', '--json', '--no-inspect'],
    { env, stdio: ['ignore', 'pipe', 'ignore'] },
  );
  return {
    child,
    ready: firstEvent(child, 'ready'),
    exited: new Promise((resolve) => child.once('exit', resolve)),
  };
}

try {
  for (const signal of ['SIGINT', 'SIGKILL'] as const) {
    const times: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const first = agent();
      await first.ready;
      first.child.kill(signal);
      await first.exited;
      const started = performance.now();
      const second = agent();
      const ready = await second.ready;
      times.push(performance.now() - started);
      if (ready.name !== 'restarted') throw new Error(`got ${String(ready.name)}`);
      second.child.kill('SIGINT');
      await second.exited;
    }
    const sorted = times.sort((a, b) => a - b);
    console.log(
      `${signal}: same name again ${sorted.map((t) => t.toFixed(0)).join(', ')} ms after the exit (median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(0)} ms)`,
    );
  }
} finally {
  edge.kill('SIGINT');
  rmSync(home, { recursive: true, force: true });
}
