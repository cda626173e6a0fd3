import cluster, { type Worker } from 'node:cluster';
import { randomBytes } from 'node:crypto';
import { createMemoryRegistry, type MemoryRegistry, type SessionRegistry } from '@tunnel2/registry';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { type AdminServer, startAdminServer } from '../operations/admin-server.js';
import type { EdgeMetrics } from '../operations/metrics.js';
import { type EdgeSettings, redactedConfig } from '../settings/edge-config.js';
import type { SettingSource } from '../settings/load-edge-config.js';
import { EDGE_WORKER_ENV } from './edge-worker.js';
import { mergeWorkerMetrics } from './merge-metrics.js';
import { serveRegistryCall } from './registry-service.js';
import { RestartBudget } from './restart-budget.js';
import { reservePorts, reusePortBalances } from './reuse-port.js';
import { isTagged, type PrimaryMessage, type WorkerMessage } from './worker-messages.js';

/** What the primary needs of the command's IO (edge-server.ts's EdgeCommandIo is one). */
export interface PrimaryIo {
  command: string;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  onShutdownSignal: (handler: (signal: string) => void) => () => void;
  /** SIGHUP: passed on to every worker (each reloads its certificates); registered only with TLS. */
  onReloadSignal?: (handler: () => void) => () => void;
}

export interface WorkersPrimaryInput {
  io: PrimaryIo;
  settings: EdgeSettings;
  sources: Readonly<Record<keyof EdgeSettings, SettingSource>>;
  logger: Logger;
  json: boolean;
  configPath: string | undefined;
}

interface Slot {
  readonly index: number;
  readonly nodeId: string;
  worker: Worker | undefined;
  listening: Extract<WorkerMessage, { t: 'listening' }> | undefined;
  restartTimer: NodeJS.Timeout | undefined;
}

/** A worker that has not answered a metrics request in this time is left out of that scrape. */
const METRICS_TIMEOUT_MS = 2_000;

/**
 * `tunnel2 server --workers N`: forks N edge workers sharing the ports (node:cluster), holds the memory
 * registry they use over IPC (Redis mode: each worker is a node of the shared registry as one edge is),
 * restarts a worker that dies, serves the operations port for the whole edge, and on the first
 * SIGTERM/SIGINT drains every worker and resolves once all have stopped. Resolves with the exit code.
 */
export async function runWorkersPrimary(input: WorkersPrimaryInput): Promise<number> {
  const { io, logger } = input;
  const count = input.settings.workers;
  // Where the kernel balances SO_REUSEPORT, each worker binds the ports itself: no hand-off through this
  // process per connection, and a dead worker's socket leaves the group at once. Its ports are settled here
  // first (port 0 made one port; a port held already refused as a single edge refuses it).
  const reusePort = reusePortBalances();
  let settings: EdgeSettings;
  try {
    settings = reusePort ? await reservePorts(input.settings) : input.settings;
  } catch (err) {
    io.stderr(`${io.command}: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
  const registry: MemoryRegistry | undefined =
    settings.registry === 'memory' ? createMemoryRegistry() : undefined;
  // The workers' cluster secret: the operator's in Redis mode (other machines' nodes share it), else one
  // made here for this run; it travels to the workers over IPC only.
  const secret = settings.clusterSecret ?? randomBytes(32).toString('base64url');
  const base = (settings.nodeId ?? `edge-${randomBytes(4).toString('hex')}`).slice(0, 58);
  const slots: Slot[] = Array.from({ length: count }, (_, index) => ({
    index,
    nodeId: `${base}-w${index}`,
    worker: undefined,
    listening: undefined,
    restartTimer: undefined,
  }));
  const budget = new RestartBudget(Math.max(10, 5 * count));
  const metricsWaiters = new Map<number, (reply: { body: string; totals: Record<string, number> }) => void>();
  let nextMetricsId = 1;
  let draining = false;
  let admin: AdminServer | undefined;
  /** Ends the command after start (set once it runs; before, a failure is the start's). */
  let failExit: (code: number) => void = () => {};

  let settleStart: (failure: string | undefined) => void = () => {};
  const started = new Promise<string | undefined>((resolve) => {
    settleStart = resolve;
  });
  let onAllExited: () => void = () => {};
  const allExited = new Promise<void>((resolve) => {
    onAllExited = resolve;
  });

  const send = (worker: Worker, message: PrimaryMessage): void => {
    if (worker.isConnected()) worker.send(message);
  };

  const fork = (slot: Slot): void => {
    const worker = cluster.fork({ [EDGE_WORKER_ENV]: '1' });
    slot.worker = worker;
    slot.listening = undefined;
    worker.on('online', () =>
      send(worker, { t: 'start', index: slot.index, settings, secret, nodeId: slot.nodeId, reusePort }),
    );
    worker.on('message', (message: unknown) => {
      if (!isTagged(message)) return;
      const m = message as WorkerMessage;
      switch (m.t) {
        case 'registry':
          if (registry !== undefined)
            serveRegistryCall(registry, m, (reply) => send(worker, reply as PrimaryMessage));
          break;
        case 'listening':
          slot.listening = m;
          logger.info(
            { worker: slot.index, workerPid: worker.process.pid, node: m.nodeId },
            'edge worker listening',
          );
          if (slots.every((s) => s.listening !== undefined)) settleStart(undefined);
          break;
        case 'failed':
          settleStart(m.message);
          break;
        case 'metrics-reply':
          metricsWaiters.get(m.id)?.({ body: m.body, totals: m.totals });
          break;
        default:
          break;
      }
    });
    worker.on('exit', (code, signal) => {
      if (slot.worker === worker) {
        slot.worker = undefined;
        slot.listening = undefined;
      }
      if (draining) {
        // A drained worker handed its agents over itself; the registry closes once all have exited.
        if (slots.every((s) => s.worker === undefined)) onAllExited();
        return;
      }
      // Its sessions are released to their agents before a new worker of the same node id starts.
      const forgotten = forgetNode(slot.nodeId);
      const delay = budget.nextDelay();
      if (delay === undefined) {
        logger.error({ worker: slot.index, code, signal }, 'edge worker died too often: stopping the edge');
        // Before the edge listened: the start fails; after: the command ends with 1 once the others drained.
        settleStart(`edge worker ${slot.index} died too often (exit ${signal ?? code})`);
        void stopAll('restart budget spent').then(() => failExit(1));
        return;
      }
      // Exit 0 is a worker that drained on its own SIGTERM (a one-worker restart), not a crash.
      logger[code === 0 ? 'info' : 'warn'](
        { worker: slot.index, code, signal, restartInMs: delay },
        code === 0 ? 'edge worker stopped: starting a new one' : 'edge worker died: restarting it',
      );
      slot.restartTimer = setTimeout(() => {
        slot.restartTimer = undefined;
        void forgotten.then(() => {
          if (!draining) fork(slot);
        });
      }, delay);
    });
  };

  /**
   * A dead worker's sessions are its agents' to reclaim: their names are kept for them (markDisconnected,
   * as a node's clean stop would) and its node record withdrawn, so the other workers hold requests for
   * those names while the agents reconnect instead of dialling a worker that is gone.
   */
  const forgetNode = async (nodeId: string): Promise<void> => {
    if (registry === undefined) return; // Redis mode: the leases run out as when a node dies
    try {
      await registry.withdrawNode(nodeId);
      for (const record of await registry.list()) {
        if (record.nodeId === nodeId && record.connected)
          await registry.markDisconnected(record.name, record.epoch, settings.reconnectGraceMs);
      }
    } catch (err) {
      logger.warn({ err, node: nodeId }, "cleaning a dead worker's sessions failed");
    }
  };

  const stopAll = async (why: string): Promise<void> => {
    if (draining) return;
    draining = true;
    logger.info(
      { why, workers: slots.filter((s) => s.worker !== undefined).length },
      'draining every worker',
    );
    for (const slot of slots) {
      clearTimeout(slot.restartTimer);
      if (slot.worker !== undefined) send(slot.worker, { t: 'drain' });
    }
    if (slots.every((s) => s.worker === undefined)) onAllExited();
    await allExited;
  };

  const gatherMetrics = async (): Promise<
    Array<{ worker: number; body: string; totals: Record<string, number> }>
  > => {
    const asks = slots.flatMap((slot) => {
      const worker = slot.worker;
      if (worker === undefined || slot.listening === undefined) return [];
      const id = nextMetricsId++;
      return [
        new Promise<{ worker: number; body: string; totals: Record<string, number> } | undefined>(
          (resolve) => {
            const timer = setTimeout(() => {
              metricsWaiters.delete(id);
              resolve(undefined);
            }, METRICS_TIMEOUT_MS);
            metricsWaiters.set(id, (reply) => {
              clearTimeout(timer);
              metricsWaiters.delete(id);
              resolve({ worker: slot.index, ...reply });
            });
            send(worker, { t: 'metrics', id });
          },
        ),
      ];
    });
    return (await Promise.all(asks)).filter((answer) => answer !== undefined);
  };

  const metrics: EdgeMetrics = {
    registry: new Registry(),
    async render() {
      const answers = await gatherMetrics();
      return { contentType: Registry.PROMETHEUS_CONTENT_TYPE, body: mergeWorkerMetrics(answers) };
    },
    async requestTotals() {
      const totals: Record<string, number> = {};
      for (const answer of await gatherMetrics())
        for (const [key, value] of Object.entries(answer.totals)) totals[key] = (totals[key] ?? 0) + value;
      return totals;
    },
    close() {},
  };

  // Only the primary forks; a worker runs the command line again and is told it is one (edge-server.ts).
  for (const slot of slots) fork(slot);
  const failure = await started;
  if (failure !== undefined) {
    io.stderr(`${io.command}: ${failure}\n`);
    await stopAll('start failed');
    await registry?.close();
    return 1;
  }
  const first = slots[0]?.listening;
  const url = first?.url ?? '';
  if (settings.adminPort !== undefined) {
    const probeRegistry: SessionRegistry | undefined = registry;
    try {
      admin = await startAdminServer(
        {
          metrics,
          // Redis mode: each worker checks its own registry; the primary's readiness is its workers'.
          registry: probeRegistry ?? readinessOnly(),
          accepting: () => !draining && slots.every((s) => s.listening !== undefined),
        },
        { host: settings.adminHost, port: settings.adminPort },
        logger,
      );
    } catch (err) {
      io.stderr(
        `${io.command}: invalid setting adminPort=${settings.adminPort}: cannot listen on ${settings.adminHost}:${settings.adminPort} (${(err as NodeJS.ErrnoException).code ?? String(err)})\n`,
      );
      await stopAll('start failed');
      await registry?.close();
      return 1;
    }
  }

  const stopReloads =
    settings.tlsCert.length === 0
      ? undefined
      : io.onReloadSignal?.(() => {
          for (const slot of slots) slot.worker?.process.kill('SIGHUP');
        });
  const exit = new Promise<number>((resolve) => {
    failExit = (code) => {
      stopReloads?.();
      void Promise.all([admin?.close(), registry?.close()]).then(() => resolve(code));
    };
    let signals = 0;
    const stop = input.io.onShutdownSignal((signal) => {
      signals++;
      if (signals > 1) {
        logger.warn(
          { signal },
          'second signal: stopping every worker without waiting for in-flight requests',
        );
        for (const slot of slots) slot.worker?.process.kill('SIGKILL');
        stop();
        stopReloads?.();
        resolve(1);
        return;
      }
      logger.info({ signal }, 'shutdown signal received');
      if (input.json) {
        io.stdout(
          `${JSON.stringify({ event: 'draining', signal, graceMs: settings.drainTimeoutMs, workers: count })}\n`,
        );
      }
      void stopAll(signal).then(async () => {
        await admin?.close();
        await registry?.close();
        if (input.json) io.stdout(`${JSON.stringify({ event: 'stopped' })}\n`);
        logger.info('stopped');
        stop();
        stopReloads?.();
        resolve(0);
      });
    });
  });

  const explicit = Object.fromEntries(
    Object.entries(redactedConfig(settings)).filter(
      ([key]) => input.sources[key as keyof EdgeSettings] !== 'default',
    ),
  );
  logger.info(
    {
      url,
      adminUrl: admin?.url,
      domain: settings.domain,
      workers: count,
      balance: reusePort ? 'reuseport' : 'round-robin',
      config: explicit,
      configFile: input.configPath,
    },
    'edge listening',
  );
  if (input.json) {
    io.stdout(
      `${JSON.stringify({ event: 'listening', url, domain: settings.domain, adminUrl: admin?.url, workers: count })}\n`,
    );
  } else {
    io.stdout(
      `tunnel2 edge listening on ${url} (${count} workers)\n` +
        (first === undefined
          ? ''
          : `agents:  ${first.addresses.agentCommand}\n` +
            `tunnels: ${first.addresses.tunnelByHost}  and  ${first.addresses.tunnelByPath}\n`) +
        (admin === undefined ? '' : `ops:     ${admin.url}/healthz  /readyz  /metrics\n`),
    );
  }
  return exit;
}

/** The primary's readiness in Redis mode: it holds no registry of its own, so it only says it is up. */
function readinessOnly(): SessionRegistry {
  const unused = (): Promise<never> =>
    Promise.reject(new Error('the primary holds no registry in Redis mode'));
  return {
    claim: unused,
    renew: unused,
    renewMany: unused,
    markDisconnected: unused,
    release: unused,
    lookup: unused,
    list: unused,
    listOwned: unused,
    announceNode: unused,
    lookupNode: unused,
    withdrawNode: unused,
    ping: () => Promise.resolve(),
    close: () => Promise.resolve(),
  };
}
