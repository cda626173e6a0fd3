import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runBench } from './support/run-bench.js';

// The p99 gate on real runs (issue #35 item 2 follow-up): the user's service as --target, answering after a
// fixed delay. Two runs at the same delay report no regression; a run whose service takes 37 ms more per
// request reports the typical second's p99 regression at --max-regress 20 and exits 1. The stage p99
// alone (one stalled second sets it) would let that through: its band is the worst second's over the best.
// 7 ms more (3 → 10 ms) was not caught here at a load average of 8 on two cores: the typical second's p99
// moved +34 % (direct) and +2.5 % (tunnel) against bands of ±121 % and ±129 %, the machine's own spread.

const work = mkdtempSync(join(tmpdir(), 'tunnel2-bench-compare-p99-'));
const BASE_DELAY_MS = 3;
const SLOWER_DELAY_MS = 40;
let delayMs = BASE_DELAY_MS;
let server: Server;
let target: string;

beforeAll(async () => {
  // The delay is the service's own work, what a slower release of it would add to every request.
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      setTimeout(() => res.end('ok'), delayMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  target = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  rmSync(work, { recursive: true, force: true });
});

const load = ['ramp', '--stages', '200', '--duration', '6', '--warmup', '2', '--path', '/'];

async function benchRun(name: string): Promise<string> {
  const out = join(work, name);
  const run = await runBench([...load, '--target', target, '--out', out]);
  expect(run.code, run.stderr).toBe(0);
  return out;
}

describe('pnpm bench compare: the p99 gate on real runs', () => {
  it('the same service twice: no regression; 37 ms slower per request: the p99 regression, exit 1', async () => {
    const first = await benchRun('first');
    const second = await benchRun('second');
    delayMs = SLOWER_DELAY_MS;
    const slower = await benchRun('slower');

    const same = await runBench(['compare', first, second, '--max-regress', '20']);
    expect(same.code, `${same.stderr}\n${same.stdout}`).toBe(0);

    const worse = await runBench(['compare', first, slower, '--max-regress', '20']);
    expect(worse.code, `${worse.stderr}\n${worse.stdout}`).toBe(1);
    // The direct side is the service itself: its p99 of the typical second is the regression. The tunnel's
    // moves by as much in ms, but at a load average of 8 on two cores its seconds spread over ±130 %.
    expect(worse.stderr).toContain('stages[rate 200 req/s 20 conn].direct.typicalSecondP99Ms');
  }, 300_000);
});
