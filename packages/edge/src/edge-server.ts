import cluster from 'node:cluster';
import { redactRedisUrl, type SessionRegistry } from '@tunnel2/registry';
import type { Logger } from 'pino';
import { buildEdge, type Edge } from './build-edge.js';
import { EdgeError, EdgeErrorCode } from './errors.js';
import { type AdminServer, answerOps, type OpsProbes, startAdminServer } from './operations/admin-server.js';
import { createEdgeLogger } from './operations/edge-logger.js';
import { createEdgeMetrics, type EdgeMetrics } from './operations/metrics.js';
import { installRequestIds } from './public/request-id.js';
import { parseEdgeCommand } from './settings/edge-args.js';
import { type EdgeSettings, redactedConfig } from './settings/edge-config.js';
import { edgeHelp, helpWidth } from './settings/edge-help.js';
import type { EdgeOptions } from './settings/edge-options.js';
import { resolveEdgeOptions } from './settings/edge-options.js';
import { MAX_TOKEN_FILE_BYTES, readSettingsFile, SettingsFileProblem } from './settings/settings-file.js';
import { toEdgeOptions } from './settings/settings-to-options.js';
import { openSharedRegistry } from './shared-registry.js';
import { EDGE_WORKER_ENV, runEdgeWorker } from './workers/edge-worker.js';
import { runWorkersPrimary } from './workers/workers-primary.js';

export interface EdgeServer {
  readonly edge: Edge;
  readonly url: string;
  /** The operations port's URL, when `adminPort` is set. */
  readonly adminUrl: string | undefined;
  readonly metrics: EdgeMetrics;
  /** SIGTERM behaviour: not ready at once, GOAWAY to agents, in-flight work gets `drainTimeoutMs`, then stop. */
  drain(): Promise<void>;
}

/** What a worker of `--workers N` starts its edge with beyond the settings (workers/edge-worker.ts). */
export interface EdgeServerExtras {
  /** The registry instead of the settings' memory one (the primary's, over IPC); the caller closes it. */
  registry?: SessionRegistry;
  /** Cluster mode with this node address and secret (a worker is a node of its machine's edge). */
  cluster?: EdgeOptions['cluster'];
  /** Called once the edge is built, before it listens (a worker feeds its own link port to it). */
  onBuilt?: (edge: Edge) => void;
  /** SO_REUSEPORT on the public, redirect and TCP ports (a worker where the OS balances them). */
  reusePort?: boolean;
}

/** Agent tokens: the `tokens` setting plus the token file's lines (blank lines and # comments skipped). */
async function collectTokens(settings: EdgeSettings): Promise<string[]> {
  const tokens = [...settings.tokens];
  if (settings.tokenFile !== undefined) {
    let text: string;
    try {
      text = await readSettingsFile(settings.tokenFile, MAX_TOKEN_FILE_BYTES);
    } catch (err) {
      const problem =
        err instanceof SettingsFileProblem && (err.code === 'NOT_REGULAR' || err.code === 'TOO_LARGE')
          ? err.message
          : `cannot read it (${(err as Error).message})`;
      throw new EdgeError(
        EdgeErrorCode.INVALID_CONFIG,
        `invalid setting tokenFile=${JSON.stringify(settings.tokenFile)}: ${problem}`,
        { cause: err },
      );
    }
    for (const line of text.split('\n')) {
      const token = line.trim();
      if (token !== '' && !token.startsWith('#')) tokens.push(token);
    }
  }
  return tokens;
}

/**
 * Builds, instruments and starts an edge from settings: request ids, metrics, the operations endpoints
 * (on `adminPort`, and on the public port only with `opsOnPublicPort`).
 */
export async function startEdgeServer(
  settings: EdgeSettings,
  logger: Logger,
  version: string,
  extras: EdgeServerExtras = {},
): Promise<EdgeServer> {
  const options = toEdgeOptions(settings, await collectTokens(settings));
  if (extras.cluster !== undefined) options.cluster = extras.cluster;
  if (extras.reusePort === true) options.reusePort = true;
  // A shared registry is the edge's to close (buildEdge closes only the memory one it makes itself).
  const shared =
    settings.registry === 'memory' || extras.registry !== undefined
      ? undefined
      : await openSharedRegistry(settings.registry, redactRedisUrl(settings.registry));
  const registry = extras.registry ?? shared;
  let edge: Edge;
  try {
    // Reads the TLS pairs: a bad one is the start's one-line refusal; the shared registry is closed first.
    edge = buildEdge({ ...options, logger, ...(registry === undefined ? {} : { registry }) });
  } catch (err) {
    await shared?.close();
    throw err;
  }
  extras.onBuilt?.(edge);
  const removeRequestIds = installRequestIds(edge, logger);
  const metrics = createEdgeMetrics(edge, version);
  let accepting = false;
  const probes: OpsProbes = { metrics, registry: edge.options.registry, accepting: () => accepting };
  if (settings.opsOnPublicPort) {
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      edge.app.get(path, async (_request, reply) => {
        const answer = await answerOps(path, probes);
        if (answer === undefined) return reply.code(404).send();
        return reply
          .code(answer.status)
          .type(answer.contentType)
          .header('cache-control', 'no-store')
          .send(answer.body);
      });
    }
  }
  /** Undoes what started so far and names the setting whose address could not be listened on. */
  const cannotListen = async (
    setting: string,
    host: string,
    port: number,
    err: unknown,
  ): Promise<EdgeError> => {
    removeRequestIds();
    metrics.close();
    await edge.close(0);
    await shared?.close();
    return new EdgeError(
      EdgeErrorCode.INVALID_CONFIG,
      `invalid setting ${setting}=${port}: cannot listen on ${host}:${port} (${(err as NodeJS.ErrnoException).code ?? String(err)})`,
      { cause: err },
    );
  };
  let url: string;
  try {
    ({ url } = await edge.listen());
  } catch (err) {
    const problem = await cannotListen('port', settings.host, settings.port, err);
    // The redirect port's own failure already names its setting.
    throw err instanceof EdgeError ? err : problem;
  }
  let admin: AdminServer | undefined;
  if (settings.adminPort !== undefined) {
    try {
      admin = await startAdminServer(probes, { host: settings.adminHost, port: settings.adminPort }, logger);
    } catch (err) {
      throw await cannotListen('adminPort', settings.adminHost, settings.adminPort, err);
    }
  }
  accepting = true;
  let drained: Promise<void> | undefined;
  return {
    edge,
    url,
    adminUrl: admin?.url,
    metrics,
    drain() {
      drained ??= (async () => {
        accepting = false;
        logger.info({ inFlight: edge.inFlight, graceMs: settings.drainTimeoutMs }, 'draining');
        await edge.close(settings.drainTimeoutMs);
        // Every public request this edge read, by how it ended: 'aborted' ones got no complete answer.
        const requests = await metrics.requestTotals();
        removeRequestIds();
        metrics.close();
        await admin?.close();
        await shared?.close();
        logger.info({ requests }, 'stopped');
      })();
      return drained;
    },
  };
}

export interface EdgeCommandIo {
  argv: string[];
  env: NodeJS.ProcessEnv;
  /** How this command is invoked, for --help. */
  command: string;
  /** stdout's terminal width, when stdout is a terminal: --help is wrapped to it (else COLUMNS, else 80). */
  columns?: number;
  version: string;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Registers the shutdown handler (SIGTERM/SIGINT, or their messages in a worker); returns an unregister. */
  onShutdownSignal: (handler: (signal: string) => void) => () => void;
  /**
   * Registers the certificate reload handler (SIGHUP); returns an unregister. Called only when the edge
   * serves TLS, so SIGHUP keeps its default action otherwise. Absent: reloads follow file changes only.
   */
  onReloadSignal?: (handler: () => void) => () => void;
}

/**
 * The whole `tunnel2 server` / `tunnel2-edge` command: settings, --help, --print-config, start, and drain on
 * the first signal (a second one stops at once). Resolves with the exit code; never calls process.exit.
 */
export async function runEdgeCommand(io: EdgeCommandIo): Promise<number> {
  // A worker of `--workers N` runs the primary's command line again; its settings come from the primary.
  // Marked by the primary: an edge that a process manager runs in its own node:cluster workers (pm2's
  // cluster mode) is not one of ours.
  if (cluster.isWorker && io.env[EDGE_WORKER_ENV] === '1')
    return runEdgeWorker(startEdgeServer, io.version, io.onShutdownSignal, io.onReloadSignal);
  // Help never depends on the rest being valid: it is what one reads to fix it.
  if (io.argv.includes('--help') || io.argv.includes('-h')) {
    io.stdout(edgeHelp(io.command, helpWidth(io.columns, io.env)));
    return 0;
  }
  let command: Awaited<ReturnType<typeof parseEdgeCommand>>;
  try {
    command = await parseEdgeCommand(io.argv, io.env);
    // Fail fast, before printing or listening, with the same checks the edge makes.
    toEdgeOptionsChecked(command.config.settings);
  } catch (err) {
    if (err instanceof EdgeError && err.code === EdgeErrorCode.INVALID_OPTION) {
      // A usage error: exit 2 (as POSIX utilities, npm and the CLI's other commands), what is wrong, the
      // usage line and where the rest is; not the whole help, which would push the error off the screen.
      io.stderr(`${io.command}: ${err.message}\nusage: ${io.command} [options]\nsee ${io.command} --help\n`);
      return 2;
    }
    if (err instanceof EdgeError) {
      io.stderr(`${io.command}: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
  const { settings, sources } = command.config;
  if (command.printConfig) {
    io.stdout(`${JSON.stringify(redactedConfig(settings), null, 2)}\n`);
    return 0;
  }
  const logger = createEdgeLogger({ level: settings.logLevel, format: settings.logFormat });
  if (settings.workers > 1) {
    // Every core: this process becomes the primary of N edge workers (workers/); one stays in process.
    return runWorkersPrimary({
      io,
      settings,
      sources,
      logger,
      json: command.json,
      configPath: command.configPath,
    });
  }
  let server: EdgeServer;
  try {
    server = await startEdgeServer(settings, logger, io.version);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    io.stderr(`${io.command}: ${message}\n`);
    await flushed(logger);
    return 1;
  }
  const stopReloads =
    server.edge.tls === undefined ? undefined : io.onReloadSignal?.(() => server.edge.tls?.reload('SIGHUP'));
  // Listening for the signal before saying so: a script that signals as soon as it reads the listening
  // line (or the banner) must get a drain, not the default action that kills the process at once.
  const exit = new Promise<number>((resolve) => {
    let signals = 0;
    const stop = io.onShutdownSignal((signal) => {
      signals++;
      if (signals > 1) {
        logger.warn({ signal }, 'second signal: stopping without waiting for in-flight requests');
        stop();
        void flushed(logger).then(() => resolve(1));
        return;
      }
      logger.info({ signal }, 'shutdown signal received');
      const drained = server.drain();
      // Written once the edge refuses new work (drain() flips that synchronously), so a script can wait
      // for it instead of racing the signal.
      if (command.json) {
        io.stdout(
          `${JSON.stringify({ event: 'draining', signal, inFlight: server.edge.inFlight, graceMs: settings.drainTimeoutMs })}\n`,
        );
      }
      void drained
        .then(() => {
          if (command.json) io.stdout(`${JSON.stringify({ event: 'stopped' })}\n`);
          stop();
          stopReloads?.();
          return flushed(logger);
        })
        .then(() => resolve(0));
    });
  });
  const explicit = Object.fromEntries(
    Object.entries(redactedConfig(settings)).filter(
      ([key]) => sources[key as keyof EdgeSettings] !== 'default',
    ),
  );
  logger.info(
    {
      url: server.url,
      adminUrl: server.adminUrl,
      domain: server.edge.options.domain,
      config: explicit,
      configFile: command.configPath,
    },
    'edge listening',
  );
  if (command.json) {
    io.stdout(
      `${JSON.stringify({ event: 'listening', url: server.url, domain: server.edge.options.domain, adminUrl: server.adminUrl })}\n`,
    );
  } else {
    // The same addresses as the landing page's (edge-addresses.ts), not the listening one (0.0.0.0...).
    const addresses = server.edge.addresses();
    io.stdout(
      `tunnel2 edge listening on ${server.url}\n` +
        `agents:  ${addresses.agentCommand}\n` +
        `tunnels: ${addresses.tunnelByHost}  and  ${addresses.tunnelByPath}\n` +
        (server.adminUrl === undefined ? '' : `ops:     ${server.adminUrl}/healthz  /readyz  /metrics\n`),
    );
  }
  return exit;
}

/** Runs the edge's own option validation (auth on a public address, secret length...) without building. */
function toEdgeOptionsChecked(settings: EdgeSettings): void {
  // The token file is read at start; for the check it only counts as "credentials configured".
  const placeholder = settings.tokenFile === undefined ? [] : ['<from tokenFile>'];
  const resolved = resolveEdgeOptions(toEdgeOptions(settings, [...settings.tokens, ...placeholder]));
  void resolved.registry.close();
}

/**
 * The log's last lines written out: the caller exits the process next, and an asynchronous destination (a
 * worker's stderr goes through the main thread) would lose them. Bounded: a stuck destination does not hold
 * the exit.
 */
function flushed(logger: Logger): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, 1_000);
    logger.flush(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
