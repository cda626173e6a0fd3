import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { type ConnectOptions, connect, type Tunnel } from '../../src/index.js';
import { silent } from './stack.js';

/** A real edge and an agent with the inspector on (an ephemeral port), forwarding to `backend`. */
export interface InspectedStack {
  edge: Edge;
  tunnel: Tunnel;
  /** The edge's port. */
  port: number;
  /** The inspector's base URL. */
  inspectorUrl: string;
  /** Closes the agent, the edge and the backend. */
  close(): Promise<void>;
}

export async function startInspectedStack(
  backend: Server,
  subdomain: string,
  tunnelOptions: Partial<ConnectOptions> = {},
): Promise<InspectedStack> {
  const edge = buildEdge({ port: 0, logger: silent });
  const { port } = await edge.listen();
  const tunnel = await connect({
    target: (backend.address() as AddressInfo).port,
    server: edge.url,
    subdomain,
    inspect: { port: 0 },
    ...tunnelOptions,
  });
  return {
    edge,
    tunnel,
    port,
    inspectorUrl: tunnel.inspectorUrl!,
    async close() {
      await tunnel.close(0);
      await edge.close(0);
      await new Promise((r) => backend.close(r));
    },
  };
}
