import type { InspectorCapture } from '@tunnel2/inspector';
import type { BackendQueue } from './backend-queue.js';
import type { H2Backend } from './http2/h2-backend.js';
import type { Target } from './target.js';

/**
 * What one forwarded request is given and what it reports, apart from the exchanges that carry it: the
 * undici one (forward-exchange.ts) hands upgrades and 100-continue to the node:http one
 * (node-http-exchange.ts) with these same options, so neither has to import the other for them.
 */

export type HostHeaderMode = 'rewrite' | 'preserve' | { value: string };

export interface RequestReport {
  method: string;
  path: string;
  status: number;
  durationMs: number;
  /** Response body bytes sent back through the tunnel. */
  bytes: number;
  /** Set when the exchange did not complete normally. */
  error?: string;
}

/**
 * Read-only: an untraced tunnel's requests all share one options object (stream-dispatch.ts), so a field
 * one request set would be every later request's.
 */
export interface ForwardOptions {
  /** The backend pool, behind the agent's own line (a cancelled request leaves it without a connection). */
  readonly backend: BackendQueue;
  readonly target: Target;
  readonly hostHeader: HostHeaderMode;
  /** The edge's frame limit, which bounds a response head. */
  readonly maxHeadSize: number;
  readonly onReport: (report: RequestReport) => void;
  /**
   * A WebSocket upgrade was reset: the edge sent more of the client's bytes before the backend's answer
   * than the protocol allows (an edge older than the agent). Said to the user once, by the tunnel.
   */
  readonly onEarlyBytesOverLimit?: (() => void) | undefined;
  /** The inspector's hook; absent when it is off, and then no capture code runs at all. */
  readonly capture?: InspectorCapture | undefined;
  /**
   * The HTTP/2 backend (`--h2c`, or an https:// target without `--http1`): requests go there, except
   * WebSocket upgrades, and all of them once ALPN has chosen HTTP/1.1. Absent: HTTP/1.1 only.
   */
  readonly h2?: H2Backend | undefined;
}
