import Pool from 'undici/lib/dispatcher/pool.js';
import { BackendQueue } from '../forwarding/backend-queue.js';
import { resolveBackendMode } from '../forwarding/http2/backend-mode.js';
import { H2Backend } from '../forwarding/http2/h2-backend.js';
import { resolveKeepalive } from '../forwarding/http2/h2-keepalive.js';
import { parseTarget, type Target } from '../forwarding/target.js';
import { poolTlsOptions, resolveTargetTls } from '../forwarding/target-tls.js';
import type { ConnectOptions } from './connect-options.js';

/**
 * An HTTP tunnel's way to its backend, for its lifetime (every session of the tunnel shares it): undici's
 * pool and the queue in front of it for HTTP/1.1, and an H2Backend when the target speaks HTTP/2 (`--h2c`,
 * or h2 offered by ALPN to an https:// target). Kept apart from the Tunnel, which only holds it, so the
 * reconnect loop reads without the backend's set-up.
 */
export interface HttpBackend {
  pool: Pool;
  backend: BackendQueue;
  h2: H2Backend | undefined;
}

/** How long start() waits to learn whether an https:// backend picks h2, so the ready line can say it. */
const ALPN_PROBE_MS = 2_000;

/**
 * The target (with its TLS, for an https:// one) and its backend, from the tunnel's options.
 * `onChosen`: the HTTP/2 backend has learnt what the target speaks (ALPN), possibly only at a request.
 */
export function openHttpBackend(
  options: ConnectOptions,
  onChosen: () => void,
): { target: Target; kind: HttpBackend } {
  const parsed = parseTarget(String(options.target));
  const tls = resolveTargetTls(parsed.origin, options);
  const target = tls === undefined ? parsed : { ...parsed, tls };
  const pool = new Pool(target.origin, {
    connections: options.connections ?? 256,
    keepAliveTimeout: 30_000,
    headersTimeout: 0,
    bodyTimeout: 0,
    ...(tls === undefined ? {} : poolTlsOptions(tls)),
  });
  const mode = resolveBackendMode(target.origin, options);
  const keepalive = resolveKeepalive(options.backendKeepalive);
  const h2 =
    mode === undefined
      ? undefined
      : new H2Backend({
          origin: target.origin,
          mode,
          tls,
          connectTimeoutMs: options.backendConnectTimeoutMs,
          keepalive,
          onChosen,
        });
  return { target, kind: { pool, backend: new BackendQueue(pool), h2 } };
}

/** One handshake to learn an https:// backend's choice of protocol: bounded, never fails. */
export async function probeHttpBackend(h2: H2Backend, servername: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    h2.probe(servername),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ALPN_PROBE_MS);
    }),
  ]);
  clearTimeout(timer);
}

/** Lets go of the queue, the HTTP/2 sessions and the pool, in that order. */
export async function closeHttpBackend(kind: HttpBackend): Promise<void> {
  kind.backend.close();
  kind.h2?.close();
  await kind.pool.close();
}
