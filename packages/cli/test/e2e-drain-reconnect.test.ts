import { buildEdge, type Edge } from '@tunnel2/edge';
import { createTestBackend, type TestBackend } from '@tunnel2/test-backend';
import { afterEach, describe, expect, it } from 'vitest';
import { connect, type ReconnectingEvent, type Tunnel } from '../src/index.js';
import { silent } from './support/stack.js';

// An edge that drains (SIGTERM, a rolling restart, a cluster node handing its agents over) sends GOAWAY
// (GOING_AWAY) and closes once the session's streams are done. Public requests for the name are waiting for
// the agent to come back meanwhile, so the agent's first reconnect goes at once, not after the backoff's
// first pause (500 ms by default). A plain connection loss still backs off.

let backend: TestBackend;
let edges: Edge[] = [];
let tunnel: Tunnel | undefined;

afterEach(async () => {
  await tunnel?.close(0);
  for (const edge of edges) await edge.close(0);
  edges = [];
  await backend?.close();
});

async function startEdge(): Promise<Edge> {
  const edge = buildEdge({ port: 0, logger: silent });
  await edge.listen();
  edges.push(edge);
  return edge;
}

describe('reconnecting after the edge drains', () => {
  it('reconnects once without the backoff pause after a drain, then backs off', async () => {
    backend = await createTestBackend();
    const first = await startEdge();
    // A long first pause, so a pass cannot come from the backoff.
    tunnel = await connect({
      target: backend.port,
      server: first.url,
      subdomain: 'drained',
      reconnect: { initialMs: 20_000, maxMs: 20_000 },
    });
    // Failed attempts are reported as 'error' events while the loop goes on.
    const errors: Error[] = [];
    tunnel.on('error', (err) => errors.push(err));
    // The session must have been up a while: a session handed back at once is not reconnected at once.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const events: ReconnectingEvent[] = [];
    const reconnected = (n: number) =>
      new Promise<void>((resolve) => {
        tunnel?.on('reconnecting', (event) => {
          events.push(event);
          if (events.length === n) resolve();
        });
      });
    const twice = reconnected(2);
    await first.close(5_000);
    edges = edges.filter((e) => e !== first);
    await twice;
    const [event, next] = events as [ReconnectingEvent, ReconnectingEvent];
    expect(event.delayMs).toBe(0);
    expect(event.reason).toMatch(/restarting or handing this tunnel to another node/);
    // The edge is gone, so that attempt fails, and the next one backs off as usual: one immediate attempt
    // per drain, never a loop without a pause.
    expect(next.delayMs).toBeGreaterThan(1_000);
    expect(errors.map((e) => (e as { code?: string }).code)).toContain('TUNNEL2_ERR_EDGE_UNREACHABLE');
  }, 30_000);
});
