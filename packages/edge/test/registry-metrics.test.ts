import { request } from 'node:http';
import {
  createMemoryRegistry,
  RegistryError,
  RegistryErrorCode,
  type SessionRegistry,
} from '@tunnel2/registry';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { buildEdge } from '../src/build-edge.js';
import { createEdgeMetrics } from '../src/operations/metrics.js';

const silent = pino({ level: 'silent' });
const SECRET = 'a-cluster-secret-of-at-least-32-characters';
const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A memory registry whose lookups of one name fail the way an unreachable Redis does. */
function failingLookups(inner: SessionRegistry, name: string): SessionRegistry {
  return {
    claim: (input) => inner.claim(input),
    renew: (n, e, t) => inner.renew(n, e, t),
    renewMany: (l, t) => inner.renewMany(l, t),
    markDisconnected: (n, e, g) => inner.markDisconnected(n, e, g),
    release: (n, e) => inner.release(n, e),
    lookup: (n) =>
      n === name
        ? Promise.reject(new RegistryError(RegistryErrorCode.UNAVAILABLE, 'registry unreachable'))
        : inner.lookup(n),
    list: () => inner.list(),
    announceNode: (a) => inner.announceNode(a),
    lookupNode: (id) => inner.lookupNode(id),
    withdrawNode: (id) => inner.withdrawNode(id),
    listOwned: (owner, space) => inner.listOwned(owner, space),
    ping: () => inner.ping(),
    close: () => inner.close(),
  };
}

function get(port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path: '/', headers: { host }, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    })
      .on('error', reject)
      .end();
  });
}

function sample(text: string, line: RegExp): number {
  const match = text.match(line);
  return match === null ? Number.NaN : Number(match[1]);
}

describe('registry metrics', () => {
  it('time every registry operation and count failures by operation', async () => {
    const memory = createMemoryRegistry();
    cleanups.push(() => memory.close());
    const edge = buildEdge({
      port: 0,
      logger: silent,
      nodeId: 'node-a',
      registry: failingLookups(memory, 'broken'),
      cluster: { secret: SECRET },
    });
    const metrics = createEdgeMetrics(edge, '0.0.0-test');
    cleanups.push(() => metrics.close());
    const { port } = await edge.listen(); // announces the node: one announceNode
    cleanups.push(() => edge.close(0));
    expect(await get(port, 'nobody.localhost')).toBe(404);
    expect(await get(port, 'broken.localhost')).toBeGreaterThanOrEqual(500);

    const { body } = await metrics.render();
    expect(body).toContain('# TYPE tunnel2_registry_operation_duration_seconds histogram');
    const count = (op: string): number =>
      sample(
        body,
        new RegExp(`^tunnel2_registry_operation_duration_seconds_count\\{operation="${op}"\\} (\\d+)$`, 'm'),
      );
    const errors = (op: string): number =>
      sample(body, new RegExp(`^tunnel2_registry_errors_total\\{operation="${op}"\\} (\\d+)$`, 'm'));
    expect(count('announceNode')).toBeGreaterThanOrEqual(1);
    expect(count('lookup')).toBeGreaterThanOrEqual(2);
    expect(errors('lookup')).toBeGreaterThanOrEqual(1);
    expect(errors('announceNode')).toBe(0);
    // Every operation has its error series from the start, at 0.
    expect(errors('renewMany')).toBe(0);
  });
});
