import type { Server as HttpServer } from 'node:http';
import type { SessionRegistry } from '@tunnel2/registry';
import type { Logger } from 'pino';
import { createEdgeLogger } from '../operations/edge-logger.js';
import type { EdgeMetrics } from '../operations/metrics.js';
import type { EdgeSettings } from '../settings/edge-config.js';
import type { EdgeOptions } from '../settings/edge-options.js';
import { IpcRegistry, type WorkerChannel } from './ipc-registry.js';
import { LinkListener } from './link-listener.js';
import { isTagged, type PrimaryMessage, type WorkerMessage, type WorkerStart } from './worker-messages.js';

/** Set by the primary in its workers' environment: this process is a worker of `--workers N`. */
export const EDGE_WORKER_ENV = 'TUNNEL2_EDGE_WORKER';

/** What a worker reads of the edge it starts (edge-server.ts's EdgeServer is one). */
export interface WorkerEdgeServer {
  readonly edge: {
    readonly app: { readonly server: HttpServer };
    addresses(): { agentCommand: string; tunnelByHost: string; tunnelByPath: string };
    /** Present when the edge serves TLS: its certificates, reloaded on SIGHUP. */
    readonly tls: { reload(reason: string): unknown } | undefined;
  };
  readonly url: string;
  readonly metrics: EdgeMetrics;
  drain(): Promise<void>;
}

/** edge-server.ts's startEdgeServer, handed in: this folder does not import the entries above it. */
export type StartEdge = (
  settings: EdgeSettings,
  logger: Logger,
  version: string,
  extras: {
    registry?: SessionRegistry;
    cluster?: EdgeOptions['cluster'];
    onBuilt?: (edge: { readonly app: { readonly server: HttpServer } }) => void;
    reusePort?: boolean;
  },
) => Promise<WorkerEdgeServer>;

/** The worker's end of node:cluster's IPC channel. */
function processChannel(): WorkerChannel {
  return {
    send: (message) => {
      process.send?.(message);
    },
    onMessage(handler) {
      const listener = (message: unknown): void => {
        if (isTagged(message)) handler(message as PrimaryMessage);
      };
      process.on('message', listener);
      return () => process.off('message', listener);
    },
  };
}

/**
 * One worker of `tunnel2 server --workers N`: waits for its settings from the primary, starts today's edge
 * as a cluster node (its own loopback port for node links, the primary's registry over IPC in memory mode),
 * answers the primary's metrics requests, and drains when told to (or on its own SIGTERM/SIGINT).
 * Resolves with the exit code once drained.
 */
export async function runEdgeWorker(
  startEdge: StartEdge,
  version: string,
  onShutdownSignal: (handler: (signal: string) => void) => () => void,
  onReloadSignal?: (handler: () => void) => () => void,
): Promise<number> {
  const channel = processChannel();
  const tell = (message: WorkerMessage): void => channel.send(message);
  const start = await new Promise<WorkerStart>((resolve) => {
    const stop = channel.onMessage((message) => {
      if (message.t !== 'start') return;
      stop();
      resolve(message);
    });
  });
  const { settings: given, index, secret, nodeId, reusePort } = start;
  const logger = createEdgeLogger({ level: given.logLevel, format: given.logFormat }).child({
    worker: index,
  });
  const memory = given.registry === 'memory';
  // The primary serves the operations port for the whole edge; a worker is one process of it.
  const settings: EdgeSettings = { ...given, workers: 1, adminPort: undefined, nodeId };
  const link = new LinkListener();
  // Memory mode: only this machine's workers dial it. Redis mode: other machines' nodes too, at the host
  // of the operator's nodeUrl and this worker's own port.
  const linkHost = memory ? '127.0.0.1' : given.host;
  let server: WorkerEdgeServer;
  const registry = memory ? new IpcRegistry(channel) : undefined;
  try {
    const port = await link.listen(linkHost);
    const advertised = memory || given.nodeUrl === undefined ? linkHost : new URL(given.nodeUrl).hostname;
    const linkUrl = `http://${advertised.includes(':') ? `[${advertised}]` : advertised}:${port}`;
    server = await startEdge(settings, logger, version, {
      ...(registry === undefined ? {} : { registry }),
      cluster: { nodeUrl: linkUrl, secret },
      onBuilt: (edge) => link.feed(edge.app.server),
      reusePort,
    });
    tell({ t: 'listening', url: server.url, nodeId, linkUrl, addresses: server.edge.addresses() });
  } catch (err) {
    link.close();
    await registry?.close();
    tell({ t: 'failed', message: err instanceof Error ? err.message : String(err) });
    return 1;
  }
  const running = server;
  // The primary passes SIGHUP on to its workers: each reloads its own certificates.
  const tls = running.edge.tls;
  const stopReloads = tls === undefined ? undefined : onReloadSignal?.(() => tls.reload('SIGHUP'));
  return new Promise<number>((resolve) => {
    let draining = false;
    const drain = (): void => {
      if (draining) return;
      draining = true;
      void running.drain().then(async () => {
        link.close();
        await registry?.close();
        stopMessages();
        stopSignals();
        stopReloads?.();
        resolve(0);
      });
    };
    const stopSignals = onShutdownSignal(drain);
    const stopMessages = channel.onMessage((message) => {
      if (message.t === 'drain') drain();
      else if (message.t === 'metrics') {
        void Promise.all([running.metrics.render(), running.metrics.requestTotals()]).then(
          ([{ body }, totals]) => tell({ t: 'metrics-reply', id: message.id, body, totals }),
        );
      }
    });
  });
}
