import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { send } from './support/http.js';

// The real bin, which runs dist/main.js: the package must be built (the root `test` script builds first).
const bin = fileURLToPath(new URL('../bin/test-backend.js', import.meta.url));

it('the CLI listens where told, prints its URL and exits cleanly on SIGTERM', async () => {
  const child = spawn(process.execPath, [bin, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = once(child, 'exit');
  const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
  const url = /(http:\/\/127\.0\.0\.1:\d+)/.exec(line)?.[1];
  expect(url).toBeDefined();
  expect((await send(url!, '/loadtest/ping')).body.toString()).toBe('pong');
  child.kill('SIGTERM');
  expect((await exited)[0]).toBe(0);
});

it('the CLI refuses a bad port with a usage message', async () => {
  const child = spawn(process.execPath, [bin, '--port', 'x'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const [code] = await once(child, 'exit');
  expect(code).toBe(2);
  expect(stderr).toContain('--port x');
  expect(stderr).toContain('usage');
});
