import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { runLoad } from '../src/measure/load-runner.js';
import type { LoadTarget } from '../src/stacks/bench-stack.js';

// The load runner against small real servers that misbehave on purpose: every failure the reports this
// kit grew from saw must land in its own error kind, and pacing must be a real, even rate.

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

async function serve(
  handler: (req: IncomingMessage, res: ServerResponse, n: number) => void,
): Promise<LoadTarget> {
  let n = 0;
  const server = createServer((req, res) => handler(req, res, ++n));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { origin: `http://127.0.0.1:${port}`, host: `127.0.0.1:${port}` };
}

const ok = (res: ServerResponse): void => {
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '4' });
  res.end('pong');
};

describe('fixed rate', () => {
  it('sends at the target rate, spread evenly rather than in a burst each second', async () => {
    const arrivals: number[] = [];
    const target = await serve((_req, res) => {
      arrivals.push(performance.now());
      ok(res);
    });
    const result = await runLoad({
      target,
      path: '/',
      connections: 10,
      durationSec: 2,
      ratePerSec: 200,
      timeoutSec: 5,
    });
    expect(result.outcomes.ok).toBe(result.outcomes.finished);
    expect(result.outcomes.errorCount()).toBe(0);
    // 400 scheduled; allow for the stop landing a slot or two either side.
    expect(result.outcomes.sent).toBeGreaterThanOrEqual(380);
    expect(result.outcomes.sent).toBeLessThanOrEqual(420);
    // autocannon's own overallRate would send each connection's quota back to back at every second: 200
    // requests inside a few ms. Evenly paced, any 100 ms window holds about 20.
    let worstWindow = 0;
    for (let i = 0, j = 0; i < arrivals.length; i++) {
      while (arrivals[i]! - arrivals[j]! > 100) j++;
      worstWindow = Math.max(worstWindow, i - j + 1);
    }
    expect(worstWindow).toBeLessThan(50);
    expect(result.missedSlots).toBe(0);
  });

  it('corrects for coordinated omission: one stall shows in corrected p99, not in raw p99', async () => {
    let stalled = false;
    const target = await serve((_req, res, n) => {
      // One answer, well into the run, takes 400 ms: its connection skips the sends due meanwhile.
      if (n === 100 && !stalled) {
        stalled = true;
        setTimeout(() => ok(res), 400);
        return;
      }
      ok(res);
    });
    const result = await runLoad({
      target,
      path: '/',
      connections: 2,
      durationSec: 2,
      ratePerSec: 200,
      timeoutSec: 5,
    });
    // Sends are 10 ms apart on each connection: about 40 were skipped while the stalled one waited.
    expect(result.missedSlots).toBeGreaterThan(20);
    expect(result.latency.max).toBeGreaterThanOrEqual(390);
    expect(result.latency.p99).toBeLessThan(100);
    expect(result.correctedLatency.p99).toBeGreaterThan(100);
    expect(result.correctedLatency.p99).toBeLessThanOrEqual(result.latency.max + 1);
  });

  it('records each second: a stall of the whole service shows as seconds with a low rate and a high p99', async () => {
    // From the 150th request on (1.5 s into a 100 RPS run) every answer is held until 2.5 s later: at least
    // one whole second in which nothing completes, whatever the machine's load does to the schedule.
    let releaseAt: number | undefined;
    const target = await serve((_req, res, n) => {
      if (n >= 150 && releaseAt === undefined) releaseAt = performance.now() + 2500;
      const wait = releaseAt === undefined ? 0 : releaseAt - performance.now();
      if (wait > 0) setTimeout(() => ok(res), wait);
      else ok(res);
    });
    const result = await runLoad({
      target,
      path: '/',
      connections: 20,
      durationSec: 5,
      ratePerSec: 100,
      timeoutSec: 5,
    });
    const seconds = result.perSecond;
    expect(seconds.length).toBeGreaterThanOrEqual(5);
    // Every finished request is in exactly one second.
    expect(seconds.reduce((sum, p) => sum + p.requests, 0)).toBe(result.outcomes.finished);
    const whole = seconds.filter((p) => p.durationSec === 1);
    const lowest = Math.min(...whole.map((p) => p.achievedRps));
    const worstP99 = Math.max(...seconds.map((p) => p.p99Ms ?? 0));
    // The stage's own p50 hides the stall; its seconds do not.
    expect(result.latency.p50).toBeLessThan(200);
    expect(lowest).toBeLessThan(20);
    expect(worstP99).toBeGreaterThan(500);
    // 100 answers a second are too few for a p99: each second says so.
    expect(seconds.filter((p) => p.p99Ms !== null).every((p) => p.lowSamplePercentiles.includes('p99'))).toBe(
      true,
    );
  });
});

describe('error kinds', () => {
  it('counts non-2xx answers by status', async () => {
    const target = await serve((_req, res, n) => {
      if (n % 2 === 0) {
        res.writeHead(503, { 'content-length': '0' });
        res.end();
        return;
      }
      ok(res);
    });
    const result = await runLoad({
      target,
      path: '/',
      connections: 2,
      durationSec: 1,
      ratePerSec: 100,
      timeoutSec: 5,
    });
    const { outcomes } = result;
    expect(outcomes.errors.http_503).toBeGreaterThan(0);
    expect(outcomes.ok + (outcomes.errors.http_503 ?? 0)).toBe(outcomes.finished);
    expect(Math.abs(outcomes.ok - (outcomes.errors.http_503 ?? 0))).toBeLessThanOrEqual(1);
  });

  it('counts a response ended prematurely (peer closes mid-body) as reset, and keeps later timings right', async () => {
    const target = await serve((_req, res, n) => {
      if (n % 5 === 0) {
        // Promise 100 bytes, send 10, close: what a crashing proxy does.
        res.writeHead(200, { 'content-length': '100' });
        res.write('0123456789');
        setImmediate(() => res.socket?.destroy());
        return;
      }
      ok(res);
    });
    const result = await runLoad({
      target,
      path: '/',
      connections: 2,
      durationSec: 1,
      ratePerSec: 100,
      timeoutSec: 5,
    });
    const { outcomes } = result;
    expect(outcomes.errors.reset).toBeGreaterThan(5);
    expect(outcomes.errors.other ?? 0).toBe(0);
    expect(outcomes.ok + (outcomes.errors.reset ?? 0)).toBe(outcomes.finished);
    // autocannon alone would time every later answer on that connection from the lost request's start.
    expect(result.latency.max).toBeLessThan(50);
  });

  it('counts a connection reset (RST) as reset', async () => {
    const target = await serve((req, res, n) => {
      if (n % 4 === 0) {
        req.socket.resetAndDestroy();
        return;
      }
      ok(res);
    });
    const result = await runLoad({
      target,
      path: '/',
      connections: 2,
      durationSec: 1,
      ratePerSec: 100,
      timeoutSec: 5,
    });
    expect(result.outcomes.errors.reset).toBeGreaterThan(5);
    expect(result.outcomes.ok + (result.outcomes.errors.reset ?? 0)).toBe(result.outcomes.finished);
  });

  it('counts an answer that never comes as timeout', async () => {
    const target = await serve((_req, res, n) => {
      if (n === 3) return; // never answered
      ok(res);
    });
    const result = await runLoad({
      target,
      path: '/',
      connections: 1,
      // autocannon's timeout is at least 1 s: the third request times out at about 1.1 s.
      durationSec: 1.6,
      ratePerSec: 20,
      timeoutSec: 1,
    });
    expect(result.outcomes.errors.timeout).toBe(1);
    expect(result.outcomes.ok).toBe(result.outcomes.finished - 1);
  });

  it('counts a refused connection as refused', async () => {
    const target = await serve((_req, res) => ok(res));
    const closed = servers.pop()!;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const result = await runLoad({
      target,
      path: '/',
      connections: 1,
      durationSec: 0.5,
      ratePerSec: 20,
      timeoutSec: 1,
    });
    expect(result.outcomes.ok).toBe(0);
    expect(result.outcomes.errors.refused).toBeGreaterThan(0);
    expect(result.outcomes.errors.other).toBeUndefined();
  });
});

describe('a target that dies mid-run', () => {
  it('finishes the stage and leaves no timer behind although every reconnect is refused at once', async () => {
    const target = await serve((_req, res) => ok(res));
    const server = servers.pop()!;
    let answered = 0;
    server.on('request', () => {
      answered += 1;
      // Well into the stage the target goes away: autocannon reconnects at once on every ECONNREFUSED.
      if (answered === 20) {
        server.close();
        server.closeAllConnections();
      }
    });
    const timersBefore = activeTimeouts();
    const result = await runLoad({
      target,
      path: '/',
      connections: 4,
      durationSec: 1.5,
      ratePerSec: 50,
      timeoutSec: 1,
    });
    expect(result.outcomes.ok).toBeGreaterThanOrEqual(15);
    expect(result.outcomes.errorCount()).toBeGreaterThan(0);
    // Each refused reconnect used to plan one more paced send (each further ahead): thousands of live
    // timers that kept the process alive long after the reports were written.
    expect(activeTimeouts()).toBeLessThanOrEqual(timersBefore + 2);
    // Paced sends stay paced while the target is gone: about rate x duration, not one per reconnect.
    expect(result.outcomes.sent).toBeLessThan(150);
  });
});

function activeTimeouts(): number {
  return process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
}

describe('closed loop', () => {
  it('sends as fast as answers come and counts every request', async () => {
    const target = await serve((_req, res) => ok(res));
    const ticks: number[] = [];
    const result = await runLoad({
      target,
      path: '/',
      connections: 4,
      durationSec: 1.2,
      ratePerSec: undefined,
      timeoutSec: 5,
      onTick: (tick) => ticks.push(tick.finished),
    });
    expect(result.outcomes.ok).toBeGreaterThan(100);
    expect(result.outcomes.ok).toBe(result.outcomes.finished);
    // At most one request per connection is still in flight when the run stops.
    expect(result.outcomes.sent - result.outcomes.finished).toBeLessThanOrEqual(4);
    expect(result.correctedLatency).toEqual(result.latency);
    expect(ticks.length).toBeGreaterThanOrEqual(1);
  });
});
