import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { SessionRegistry } from '@tunnel2/registry';
import type { Logger } from 'pino';
import type { EdgeMetrics } from './metrics.js';

// Not an `import`: an ESM import of node:http also loads Node's bundled undici (README.md, "Development").
const { createServer } = process.getBuiltinModule('node:http');

export interface OpsProbes {
  metrics: EdgeMetrics;
  registry: SessionRegistry;
  /** False before the edge listens and once it drains. */
  accepting: () => boolean;
  /** A registry that takes longer than this to answer a ping is not ready. */
  registryTimeoutMs?: number;
}

export interface OpsAnswer {
  status: number;
  contentType: string;
  body: string;
}

async function registryCheck(registry: SessionRegistry, timeoutMs: number): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      registry.ping(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    return 'ok';
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  } finally {
    clearTimeout(timer);
  }
}

/** The answer of an operations path, or undefined when the path is not one. Shared by both ports. */
export async function answerOps(path: string, probes: OpsProbes): Promise<OpsAnswer | undefined> {
  switch (path) {
    case '/healthz':
      // Alive: the event loop answers. Nothing else, so a slow registry never gets the process restarted.
      return { status: 200, contentType: 'text/plain; charset=utf-8', body: 'ok\n' };
    case '/readyz': {
      const accepting = probes.accepting();
      const registry = await registryCheck(probes.registry, probes.registryTimeoutMs ?? 2_000);
      const ready = accepting && registry === 'ok';
      return {
        status: ready ? 200 : 503,
        contentType: 'application/json',
        body: `${JSON.stringify({ ready, accepting, registry })}\n`,
      };
    }
    case '/metrics': {
      const { contentType, body } = await probes.metrics.render();
      return { status: 200, contentType, body };
    }
    default:
      return undefined;
  }
}

export interface AdminServer {
  readonly url: string;
  close(): Promise<void>;
}

/** The operations port: /healthz, /readyz, /metrics. Kept off the public port so the internet never sees them. */
export async function startAdminServer(
  probes: OpsProbes,
  listen: { host: string; port: number },
  logger: Logger,
): Promise<AdminServer> {
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' });
      res.end('only GET and HEAD\n');
      return;
    }
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    answerOps(path, probes).then(
      (answer) => {
        const { status, contentType, body } = answer ?? {
          status: 404,
          contentType: 'text/plain; charset=utf-8',
          body: 'not found: try /healthz, /readyz or /metrics\n',
        };
        res.writeHead(status, {
          'content-type': contentType,
          'content-length': Buffer.byteLength(body),
          'cache-control': 'no-store',
        });
        res.end(req.method === 'HEAD' ? undefined : body);
      },
      (err: unknown) => {
        logger.error({ err, path }, 'operations endpoint failed');
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
        res.end('internal error\n');
      },
    );
  });
  // Probes and scrapers open short connections; none should keep the process from stopping.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const host = listen.host.includes(':') ? `[${listen.host}]` : listen.host;
  return {
    url: `http://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
