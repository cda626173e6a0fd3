import type { Agent } from 'node:http';
import { send } from './http-client.js';
import { until } from './stack.js';

// The steady load of the replica fault suites (e2e-replicas-faults, e2e-cluster-replicas-faults): ~500
// requests/s to a name served by counting backends `r0`..`r9`, each answer kept with when it was asked.

/** Requests started per tick, the tick, and the most in flight at once: ~500 requests/s. */
const PER_TICK = 5;
const TICK_MS = 10;
export const MAX_OUTSTANDING = 100;

export interface Outcome {
  startedAt: number;
  endedAt: number;
  /** The backend's id on a 200, else the status and the edge's error code. */
  answer: string;
  ok: boolean;
}

/** One request to `host` through `port`; never rejects (a failure is an outcome). */
export async function requestOnce(port: number, host: string, agent: Agent): Promise<Outcome> {
  const startedAt = performance.now();
  try {
    const res = await send({ port, path: '/', headers: ['Host', host], agent, timeoutMs: 15_000 });
    const ok = res.status === 200 && /^r\d$/.test(res.body.toString());
    const answer = ok ? res.body.toString() : `${res.status} ${res.headers['x-tunnel2-error'] ?? ''}`;
    return { startedAt, endedAt: performance.now(), answer, ok };
  } catch (err) {
    return { startedAt, endedAt: performance.now(), answer: `aborted ${String(err)}`, ok: false };
  }
}

/** ~500 `request()`s per second until stop(), at most MAX_OUTSTANDING in flight. */
export function steadyLoad(request: () => Promise<Outcome>, bound: { timeoutMs: number }) {
  const outcomes: Outcome[] = [];
  const pending = new Set<Promise<void>>();
  const timer = setInterval(() => {
    for (let i = 0; i < PER_TICK && pending.size < MAX_OUTSTANDING; i++) {
      const p = request().then((outcome) => {
        outcomes.push(outcome);
        pending.delete(p);
      });
      pending.add(p);
    }
  }, TICK_MS);
  return {
    outcomes,
    /** Resolves once `count` more requests have been answered. */
    more(count: number): Promise<void> {
      const target = outcomes.length + count;
      return until(() => outcomes.length >= target, { what: `${count} more answers`, ...bound });
    },
    async stop(): Promise<Outcome[]> {
      clearInterval(timer);
      await Promise.all([...pending]);
      return outcomes;
    },
  };
}

/** The answered requests per second over the load's span. */
export function rate(outcomes: Outcome[]): number {
  if (outcomes.length < 2) return 0;
  const first = Math.min(...outcomes.map((o) => o.startedAt));
  const last = Math.max(...outcomes.map((o) => o.endedAt));
  return Math.round((outcomes.length * 1000) / (last - first));
}
