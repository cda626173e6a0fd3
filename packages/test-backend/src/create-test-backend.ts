import { EventEmitter } from 'node:events';
import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { invalidArgument } from './errors.js';
import { createRouter } from './router.js';
import { routes } from './routes.js';

// Not an `import`: an ESM import of node:http also loads Node's bundled undici (README.md, "Development").
const { createServer } = process.getBuiltinModule('node:http');

export interface TestBackendOptions {
  /** Port to listen on; default 0 (any free port, see `port` on the result). */
  port?: number;
  /** Address to listen on; default 127.0.0.1. */
  host?: string;
}

interface ResolvedTestBackendOptions {
  port: number;
  host: string;
}

function resolveTestBackendOptions(options: TestBackendOptions): ResolvedTestBackendOptions {
  const port = options.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw invalidArgument(`port must be an integer in [0, 65535], got ${port}`);
  }
  const host = options.host ?? '127.0.0.1';
  if (typeof host !== 'string' || host.length === 0) throw invalidArgument('host must be a non-empty string');
  return { port, host };
}

/** Live counters; read them at any time. */
export interface TestBackendStats {
  /** Requests received. */
  requests: number;
  /** Requests whose response has neither finished nor been aborted yet. */
  inFlight: number;
  /**
   * Requests whose client went away before the response finished. Connections the backend drops on
   * purpose (/abort-after) or cuts in close() are not counted.
   */
  aborted: number;
}

export interface TestBackendEvents {
  /** A request's client went away before its response finished (the request's url). */
  aborted: [url: string];
}

export interface TestBackend {
  /** Base URL, like http://127.0.0.1:41234 (no trailing slash). */
  url: string;
  port: number;
  server: Server;
  stats: Readonly<TestBackendStats>;
  events: EventEmitter<TestBackendEvents>;
  /** Resolves with the url of the next request whose client goes away (only urls starting with `prefix`). */
  nextAbort(prefix?: string): Promise<string>;
  /** Stops listening and destroys every connection, kept-alive and in-flight ones included; idempotent. */
  close(): Promise<void>;
}

/** Starts the backend (127.0.0.1, port 0 by default) and resolves once it listens. */
export async function createTestBackend(options: TestBackendOptions = {}): Promise<TestBackend> {
  const { port, host } = resolveTestBackendOptions(options);
  const stats: TestBackendStats = { requests: 0, inFlight: 0, aborted: 0 };
  const events = new EventEmitter<TestBackendEvents>();
  const dropped = new WeakSet<ServerResponse>();
  let closing: Promise<void> | undefined;
  const dropConnection = (res: ServerResponse): void => {
    dropped.add(res);
    res.destroy();
  };
  const route = createRouter(routes);

  const server = createServer(
    {
      // Longer than any client's or proxy's idle timeout: the client always closes an idle connection
      // first, so a request is never sent on a socket this server is closing (a spurious reset).
      keepAliveTimeout: 65_000,
      // Slow multi-GiB uploads through a tunnel are legitimate here; close() cleans up whatever is left.
      requestTimeout: 0,
      noDelay: true,
    },
    (req, res) => {
      stats.requests++;
      stats.inFlight++;
      res.once('close', () => {
        stats.inFlight--;
        if (res.writableFinished || dropped.has(res) || closing !== undefined) return;
        stats.aborted++;
        events.emit('aborted', req.url ?? '/');
      });
      route(req, res, dropConnection);
    },
  );

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;

  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}`,
    port: bound,
    server,
    stats,
    events,
    nextAbort: (prefix = '') =>
      new Promise((resolve) => {
        const onAbort = (url: string): void => {
          if (!url.startsWith(prefix)) return;
          events.off('aborted', onAbort);
          resolve(url);
        };
        events.on('aborted', onAbort);
      }),
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        // server.close() alone waits for kept-alive sockets; a test backend must stop now.
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
