import { buildEdge, type Edge } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { send } from './support/http-client.js';
import { silent } from './support/stack.js';

// A request whose owner node is being looked up in the registry (a round trip, on every cache miss) was
// not counted in flight: a node draining meanwhile saw nothing to wait for, tore its links down, and the
// request then met them closed and its client was reset.

const SECRET = 'a-cluster-secret-of-at-least-32-characters';
/** How long node A's registry takes to answer while `slow` is set: longer than A's whole teardown. */
const LOOKUP_DELAY_MS = 150;

type Backend = Awaited<ReturnType<typeof createTestBackend>>;
type SessionRegistry = Edge['options']['registry'];

let a: Edge;
let b: Edge;
let backend: Backend;
let tunnel: Tunnel;
let slow = false;
/** Called at the first registry call made while `slow` is set. */
let onSlowCall: () => void = () => {};

/** The registry B uses, as A sees it: every answer late by LOOKUP_DELAY_MS while `slow` is set. */
function delayed(registry: SessionRegistry): SessionRegistry {
  return new Proxy(registry, {
    get(target, key, receiver) {
      const value: unknown = Reflect.get(target, key, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]): unknown => {
        const result: unknown = value.apply(target, args);
        if (!slow || !(result instanceof Promise)) return result;
        onSlowCall();
        return result.then(
          (answer: unknown) => new Promise((resolve) => setTimeout(() => resolve(answer), LOOKUP_DELAY_MS)),
        );
      };
    },
  });
}

beforeAll(async () => {
  b = buildEdge({ port: 0, logger: silent, nodeId: 'node-b', cluster: { secret: SECRET } });
  a = buildEdge({
    port: 0,
    logger: silent,
    nodeId: 'node-a',
    registry: delayed(b.options.registry),
    cluster: { secret: SECRET },
  });
  await b.listen();
  await a.listen();
  backend = await createTestBackend();
  tunnel = await connect({ target: backend.port, server: b.url, subdomain: 'shop' });
});

afterAll(async () => {
  slow = false;
  await tunnel?.close(0);
  await b?.close(0);
  await a?.close(0);
  await backend?.close();
});

describe('a node draining while a request it took waits for its owner lookup', () => {
  it('waits for the request, forwards it and answers it', async () => {
    slow = true;
    const lookingUp = new Promise<void>((resolve) => (onSlowCall = resolve));
    const answer = send({
      port: Number(new URL(a.url).port),
      path: '/loadtest/ping',
      headers: ['Host', 'shop.localhost'],
      timeoutMs: 10_000,
    });
    // The request is taken and its owner lookup under way (A's cache is cold) when A is told to stop.
    await lookingUp;
    const closed = a.close(5_000);
    const res = await answer;
    await closed;
    expect(res.status).toBe(200);
    expect(res.headers['x-tunnel2-node']).toBe('node-b');
  });
});
