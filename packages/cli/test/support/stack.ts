import { buildEdge, type Edge, type EdgeOptions } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { pino } from 'pino';
import { type ConnectOptions, connect, type Tunnel } from '../../src/index.js';

export type Backend = Awaited<ReturnType<typeof createTestBackend>>;

export interface Stack {
  backend: Backend;
  edge: Edge;
  tunnel: Tunnel;
  /** Edge port. */
  port: number;
  name: string;
  /** Host header that routes to this tunnel by host. */
  host: string;
  close(): Promise<void>;
}

export const silent = pino({ level: 'silent' });

/** A real backend, a real edge and a real agent, all on loopback with ephemeral ports. */
export async function startStack(
  options: { edge?: EdgeOptions; tunnel?: Partial<ConnectOptions>; name?: string } = {},
): Promise<Stack> {
  const backend = await createTestBackend();
  const edge = buildEdge({ port: 0, logger: silent, ...options.edge });
  const { port } = await edge.listen();
  const name = options.name ?? 'app';
  const tunnel = await connect({
    target: backend.port,
    server: edge.url,
    subdomain: name,
    ...options.tunnel,
  });
  return {
    backend,
    edge,
    tunnel,
    port,
    name,
    host: `${name}.localhost:${port}`,
    async close() {
      await tunnel.close(0);
      await edge.close(0);
      await backend.close();
    },
  };
}

/**
 * Resolves when `predicate` holds, checking every few ms; bounded by the test timeout, or sooner by
 * `bound.timeoutMs`, then rejects naming `bound.what`.
 */
export async function until(
  predicate: () => boolean,
  bound: { what: string; timeoutMs: number } | undefined = undefined,
): Promise<void> {
  const deadline = bound === undefined ? Number.POSITIVE_INFINITY : performance.now() + bound.timeoutMs;
  while (!predicate()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${bound?.what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
