import type { Server } from 'node:http';
import { createCapture, DEFAULT_BODY_LIMIT, type InspectorCapture } from './capture/capture.js';
import { EntryStore } from './capture/entry-store.js';
import type { ReplayTarget } from './capture/replay.js';
import { InspectorError, InspectorErrorCode } from './errors.js';
import { createApiHandler } from './server/api-server.js';
import { EventStream, PING_INTERVAL_MS } from './server/event-stream.js';
import { createHostGuard } from './server/host-guard.js';
import { WorkGate } from './server/work-gate.js';
import { defaultStaticDir } from './static-files.js';
import { toSummary } from './views/entry-view.js';
import { nameFromPublicUrl } from './views/har-file-name.js';

// Not an `import`: an ESM import of node:http also loads Node's bundled undici (README.md, "Development").
const { createServer } = process.getBuiltinModule('node:http');

export const DEFAULT_INSPECTOR_HOST = '127.0.0.1';
/** Tried in turn when no port is given; then an ephemeral one. */
export const DEFAULT_INSPECTOR_PORTS = [4040, 4041, 4042, 4043, 4044, 4045, 4046, 4047, 4048, 4049];

export interface InspectorOptions {
  /** Where replays are sent. */
  target: ReplayTarget;
  /** Default 127.0.0.1: the inspector shows every request's headers and bodies. */
  host?: string;
  /** Default: the first free of 4040..4049, else an ephemeral port. 0: an ephemeral port. */
  port?: number;
  /** Bytes kept of each body (default 1 MiB; at most half the budget, lowered to that when above). */
  bodyLimit?: number;
  /** Bytes all entries together may hold (default 64 MiB). */
  budget?: number;
  /** Entries kept (default 1,000). */
  maxEntries?: number;
  version?: string;
  /** The page's folder (default: the package's static/). */
  staticDir?: string;
}

export interface Inspector {
  /** The hook the agent's exchanges call. */
  readonly capture: InspectorCapture;
  readonly store: EntryStore;
  /** `http://host:port` once listening. */
  readonly url: string;
  /**
   * The tunnel's public URL and name, once its session is up (the name goes into HAR file names; without one it
   * is read from the URL).
   */
  /** `replicas`: how many agents served the name with this one when it connected (`--replica`). */
  setPublicUrl(url: string | undefined, name?: string, replicas?: number): void;
  close(): Promise<void>;
}

function listenOn(server: Server, host: string, port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      server.off('listening', onListening);
      if (err.code === 'EADDRINUSE') resolve(false);
      else reject(err);
    };
    const onListening = (): void => {
      server.off('error', onError);
      resolve(true);
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}

function validLimit(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new InspectorError(InspectorErrorCode.INVALID_OPTION, `${name} must be a non-negative integer`);
  }
  return value;
}

/** Starts the inspector: the capture store and its HTTP server (API and page), listening when it resolves. */
export async function createInspector(options: InspectorOptions): Promise<Inspector> {
  const store = new EntryStore({ budgetBytes: options.budget, maxEntries: options.maxEntries });
  // Each exchange captures two bodies within the budget: a limit past half of it could never be kept whole.
  const bodyLimit = Math.min(
    validLimit('inspect body limit', options.bodyLimit, DEFAULT_BODY_LIMIT),
    Math.floor(store.budgetBytes / 2),
  );
  const onEntry = (id: string): void => {
    const entry = store.get(id);
    if (entry !== undefined) events.send('entry', toSummary(entry));
  };
  // The store tells of new entries only while a page listens: with none, storing one costs no event at all.
  const events = new EventStream(PING_INTERVAL_MS, (readers) => {
    if (readers === 0) store.off('entry', onEntry);
    else if (!store.listeners('entry').includes(onEntry)) store.on('entry', onEntry);
  });
  store.on('clear', () => events.send('clear', {}));
  store.on('status', (status) => events.send('status', status));
  const closing = new AbortController();
  const host = options.host ?? DEFAULT_INSPECTOR_HOST;
  let publicUrl: string | null = null;
  let tunnelName: string | null = null;
  let replicas: number | null = null;
  let hostAllowed: (host: string | undefined) => boolean = () => false;
  const server = createServer(
    createApiHandler({
      store,
      events,
      bodyLimit,
      target: options.target,
      version: options.version ?? '0.0.0',
      staticDir: options.staticDir ?? defaultStaticDir(),
      publicUrl: () => publicUrl,
      tunnelName: () => tunnelName ?? nameFromPublicUrl(publicUrl),
      replicas: () => replicas,
      hostAllowed: (h) => hostAllowed(h),
      closing: closing.signal,
      gate: new WorkGate(),
    }),
  );
  const ports = options.port === undefined ? [...DEFAULT_INSPECTOR_PORTS, 0] : [options.port];
  let listening = false;
  try {
    for (const port of ports) {
      if (await listenOn(server, host, port)) {
        listening = true;
        break;
      }
    }
  } catch (err) {
    throw new InspectorError(
      InspectorErrorCode.LISTEN_FAILED,
      `inspector cannot listen on ${host}: ${String(err)}`,
      {
        cause: err,
      },
    );
  }
  if (!listening) {
    throw new InspectorError(
      InspectorErrorCode.LISTEN_FAILED,
      `inspector: ${host}:${options.port} is in use`,
    );
  }
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  hostAllowed = createHostGuard(host, port);
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  return {
    capture: createCapture(store, bodyLimit),
    store,
    url,
    setPublicUrl(value, name, count) {
      publicUrl = value ?? null;
      tunnelName = name ?? null;
      replicas = count ?? null;
    },
    close: () =>
      new Promise<void>((resolve) => {
        closing.abort();
        events.close();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
