import type { ClientHttp2Session } from 'node:http2';
import type { TLSSocket } from 'node:tls';
import type { TargetTls } from '../target-tls.js';
import { afterGoaway, DEFAULT_KEEPALIVE, type KeepaliveSettings, keepAlive } from './h2-keepalive.js';

// node:http2 and node:tls are loaded when the first HTTP/2 session is dialled, not with the agent: a tunnel
// to an HTTP/1.1 backend never pays for them (the agent's start-up footprint is measured in a test).
const http2 = (): typeof import('node:http2') => process.getBuiltinModule('node:http2');
const tlsModule = (): typeof import('node:tls') => process.getBuiltinModule('node:tls');
const netModule = (): typeof import('node:net') => process.getBuiltinModule('node:net');

/**
 * The HTTP/2 side of a tunnel's backend: a few node:http2 client sessions to the target, shared by every
 * request (streams are multiplexed; a new one goes to the least-loaded session below the backend's
 * SETTINGS_MAX_CONCURRENT_STREAMS, and a session is added when all are full, up to `maxSessions`).
 *
 * node:http2 and not undici's `allowH2`: undici 8 hands back no RST_STREAM code (a backend's CANCEL and
 * REFUSED_STREAM cannot be told from a failure), has no way to send request trailers (gRPC clients send
 * none today, but HTTP/2 allows them and the contract carries them), and its h2 path takes no part in the
 * pause/resume the tunnel's windows rely on for a request body. node:http2 gives all four directly.
 *
 * A session that says GOAWAY or closes is retired at once (its streams in flight finish); the next request
 * dials again, so a backend that restarts is reached with no state kept here. A session whose backend
 * leaves a keep-alive PING unanswered (h2-keepalive.ts) is destroyed: its streams fail, and it is retired.
 */

/** What a tunnel asked of its backend's protocol. */
export type BackendMode =
  /** `--h2c`: HTTP/2 with prior knowledge on plain TCP (gRPC servers). */
  | 'h2c'
  /** An https:// target without `--http1`: ALPN offers h2 and http/1.1, the backend picks. */
  | 'alpn';

/** The protocol a tunnel's backend speaks, as the `ready` event says it. */
export type BackendProtocol = 'h2c' | 'h2' | 'http/1.1';

export interface H2BackendOptions {
  /** `http://host:port` (h2c) or `https://host:port` (ALPN). */
  origin: string;
  mode: BackendMode;
  tls?: TargetTls | undefined;
  /** Sessions kept at most (default 4): streams beyond their concurrency limits wait in node:http2. */
  maxSessions?: number;
  /** How long a dial may take, TCP, TLS and the backend's SETTINGS together (default 10 s). */
  connectTimeoutMs?: number | undefined;
  /** PINGs on every session (default DEFAULT_KEEPALIVE: after 310 s quiet, 20 s to answer); false: none. */
  keepalive?: KeepaliveSettings | false | undefined;
  /** Told once when an https:// backend's ALPN choice becomes known (h2 or http/1.1). */
  onChosen?: ((protocol: BackendProtocol) => void) | undefined;
}

interface Slot {
  session: ClientHttp2Session;
  /** Streams this agent opened on it that have not closed. */
  active: number;
  /** The SNI it was opened with: sessions are reused only for requests that would send the same. */
  servername: string;
}

/** A session for a request, or word that the backend chose HTTP/1.1 (ALPN): the request goes that way. */
export type OpenedSession = { session: ClientHttp2Session; release: () => void } | 'http/1.1';

/** Streams above this many on each session make a new session worth dialling (below the max). */
const SPREAD_ABOVE = 100;
/** Receive window of each backend stream, and of a whole backend session. */
const STREAM_WINDOW = 256 * 1024;
const SESSION_WINDOW = 16 * 1024 * 1024;
/** The code of a dial answered with something other than HTTP/2 (backend-error.ts words it). */
export const NOT_HTTP2 = 'TUNNEL2_ERR_BACKEND_NOT_HTTP2_SERVER';
/** A backend that takes the connection but never sends its SETTINGS (not HTTP/2 at all) is given up on. */
const CONNECT_TIMEOUT_MS = 10_000;

export class H2Backend {
  readonly #options: H2BackendOptions;
  readonly #slots: Slot[] = [];
  /** Dials under way, by SNI: requests arriving meanwhile wait for the same one. */
  readonly #dialling = new Map<string, Promise<void>>();
  #chosen: BackendProtocol | undefined;
  /** The PINGs of the next sessions (backed off when the backend objected to them), or false: none. */
  #keepalive: KeepaliveSettings | false;
  #closed = false;
  /** Each dial under way, given up at close(): its socket and timer would keep the process alive. */
  readonly #abandons = new Set<() => void>();

  constructor(options: H2BackendOptions) {
    this.#options = options;
    this.#keepalive = options.keepalive ?? DEFAULT_KEEPALIVE;
    if (options.mode === 'h2c') this.#chosen = 'h2c';
  }

  /** What the backend speaks: known at once for h2c, after the first TLS handshake for ALPN. */
  get protocol(): BackendProtocol | undefined {
    return this.#chosen;
  }

  /** The interval of the next sessions' PINGs (undefined: PINGs off). */
  get keepaliveIntervalMs(): number | undefined {
    return this.#keepalive === false ? undefined : this.#keepalive.intervalMs;
  }

  /** Sessions open now. */
  get sessions(): number {
    return this.#slots.length;
  }

  /**
   * A session to open one stream on: the least-loaded one for `servername`, or a new one when every one is
   * busy and fewer than maxSessions exist. `release` is called once when the stream closes.
   */
  open(servername: string): Promise<OpenedSession> {
    return this.#open(servername, 0);
  }

  /**
   * `dials`: how many dials this request already waited for. Every request that waited (the one that
   * started the dial too) chooses again once it is done, so a session is never handed more streams than
   * its limit while another could be dialled; after maxSessions rounds (a backend that drops each new
   * session at once) the request takes what there is, or fails, rather than dial for good.
   */
  #open(servername: string, dials: number): Promise<OpenedSession> {
    if (this.#closed) return Promise.reject(new Error('the tunnel is closing'));
    if (this.#chosen === 'http/1.1') return Promise.resolve('http/1.1');
    const best = this.#leastLoaded(servername);
    const max = this.#options.maxSessions ?? 4;
    const count = this.#slots.filter((s) => s.servername === servername).length;
    if (best !== undefined && (best.active < this.#limitOf(best) || count >= max || dials >= max)) {
      return Promise.resolve(this.#take(best));
    }
    if (dials >= max) return Promise.reject(new Error('the backend closed the HTTP/2 session'));
    return this.#sharedDial(servername).then(() => this.#open(servername, dials + 1));
  }

  /** The dial under way for `servername`, or a new one: requests arriving meanwhile wait for the same. */
  #sharedDial(servername: string): Promise<void> {
    let dial = this.#dialling.get(servername);
    if (dial === undefined) {
      dial = this.#dial(servername).finally(() => this.#dialling.delete(servername));
      this.#dialling.set(servername, dial);
    }
    return dial;
  }

  /**
   * Dials once to learn the protocol an https:// target picks, so that the `ready` line can say it.
   * Failures are swallowed: a backend that is down is learnt about by the first request.
   */
  async probe(servername: string): Promise<BackendProtocol | undefined> {
    if (this.#chosen !== undefined) return this.#chosen;
    try {
      await this.#sharedDial(servername);
    } catch {
      // said by the first request instead
    }
    return this.#chosen;
  }

  /** Closes every session (streams in flight are cut) and refuses new requests. */
  close(): void {
    this.#closed = true;
    for (const slot of this.#slots.splice(0)) slot.session.destroy();
    for (const abandon of this.#abandons) abandon();
  }

  #choose(protocol: BackendProtocol): void {
    const first = this.#chosen === undefined;
    this.#chosen = protocol;
    if (first) this.#options.onChosen?.(protocol);
  }

  #limitOf(slot: Slot): number {
    const advertised = slot.session.remoteSettings.maxConcurrentStreams ?? 100;
    return Math.min(advertised, SPREAD_ABOVE);
  }

  #leastLoaded(servername: string): Slot | undefined {
    let best: Slot | undefined;
    for (const slot of this.#slots) {
      if (slot.servername !== servername || slot.session.closed || slot.session.destroyed) continue;
      if (best === undefined || slot.active < best.active) best = slot;
    }
    return best;
  }

  #take(slot: Slot): OpenedSession {
    slot.active++;
    let released = false;
    return {
      session: slot.session,
      release: () => {
        if (released) return;
        released = true;
        slot.active--;
      },
    };
  }

  /** Dials one session and pools it (or learns that the backend chose HTTP/1.1). */
  #dial(servername: string): Promise<void> {
    const { origin, mode, tls } = this.#options;
    let timer: NodeJS.Timeout | undefined;
    let giveUp: () => void = () => {};
    let abandon: () => void = () => {};
    const dial = new Promise<void>((resolve, reject) => {
      abandon = () => {
        reject(new Error('the tunnel is closing'));
        giveUp();
      };
      this.#abandons.add(abandon);
      // A backend that takes the connection but never completes TLS or never sends SETTINGS (not HTTP/2 at
      // all) must not hold the dial, and every request waiting on it, for good.
      timer = setTimeout(() => {
        reject(
          Object.assign(new Error('backend did not complete the connection in time'), { code: 'ETIMEDOUT' }),
        );
        giveUp();
      }, this.#options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS);
      const url = new URL(origin);
      // Windows as the tunnel's own (PROTOCOL.md §11): a stream may have 256 KiB in flight, a session 16 MiB.
      // node:http2's 64 KiB defaults would make the backend hop, not the tunnel, the bottleneck of a stream.
      const connectOptions = {
        maxSessionMemory: 64,
        peerMaxConcurrentStreams: 1000,
        settings: { initialWindowSize: STREAM_WINDOW },
      };
      let session: ClientHttp2Session;
      if (mode === 'h2c') {
        // The socket is the agent's own, so that a dial given up closes it: node:http2 holds the socket's
        // handle, and neither the session's destroy() before the backend's SETTINGS nor the socket's own
        // destroy() closes the connection (one more left open per timed-out dial); a reset first does.
        const socket = netModule().connect({
          host: url.hostname.replace(/^\[|\]$/g, ''),
          port: Number(url.port || 80),
        });
        session = http2().connect(origin, { ...connectOptions, createConnection: () => socket });
        giveUp = () => {
          // Still connecting (no SYN-ACK yet): nothing to reset, and resetAndDestroy() would wait for the
          // connection to reset it then.
          if (socket.connecting) socket.destroy();
          else socket.resetAndDestroy();
          session.destroy();
        };
      } else {
        // ALPN by hand: node:http2 offers h2 only and fails when the backend has no HTTP/2. Offering both,
        // the backend's choice decides, and an HTTP/1.1 one is handed to the undici path.
        // Over a TCP socket of the agent's own, for the reason given above for h2c: only a reset of the TCP
        // socket closes a connection node:http2 holds (a TLS socket's handle cannot be reset).
        const host = url.hostname.replace(/^\[|\]$/g, '');
        const tcp = netModule().connect({ host, port: Number(url.port || 443) });
        const socket: TLSSocket = tlsModule().connect({
          socket: tcp,
          host,
          ALPNProtocols: ['h2', 'http/1.1'],
          ...(servername === '' ? {} : { servername }),
          rejectUnauthorized: tls?.rejectUnauthorized ?? true,
          ...(tls?.ca === undefined ? {} : { ca: tls.ca }),
        });
        const resetTcp = (): void => {
          if (tcp.connecting) tcp.destroy();
          else tcp.resetAndDestroy();
        };
        giveUp = () => {
          resetTcp();
          socket.destroy();
        };
        const failed = (err: Error): void => reject(err);
        socket.once('error', failed);
        socket.once('secureConnect', () => {
          socket.off('error', failed);
          if (socket.alpnProtocol !== 'h2') {
            this.#choose('http/1.1');
            socket.destroy();
            resolve();
            return;
          }
          this.#choose('h2');
          const h2 = http2().connect(origin, { ...connectOptions, createConnection: () => socket });
          giveUp = () => {
            resetTcp();
            h2.destroy();
          };
          this.#adopt(h2, servername, resolve, reject);
        });
        return;
      }
      this.#adopt(session, servername, resolve, reject);
    });
    return dial.finally(() => {
      clearTimeout(timer);
      this.#abandons.delete(abandon);
    });
  }

  /** Waits for the session's SETTINGS, then pools it; retires it on GOAWAY, close or error. */
  #adopt(
    session: ClientHttp2Session,
    servername: string,
    resolve: () => void,
    reject: (err: Error) => void,
  ): void {
    const slot: Slot = { session, active: 0, servername };
    const retire = (): void => {
      const index = this.#slots.indexOf(slot);
      if (index >= 0) this.#slots.splice(index, 1);
    };
    let ready = false;
    session.on('error', (err) => {
      retire();
      if (ready) return;
      // nghttp2's "Protocol error" before any SETTINGS: the bytes that came back were not HTTP/2 (an
      // HTTP/1.1 server answering the preface with a 400), which the user can fix by dropping --h2c.
      const notH2 = (err as { code?: unknown }).code === 'ERR_HTTP2_ERROR';
      reject(notH2 ? Object.assign(new Error(err.message, { cause: err }), { code: NOT_HTTP2 }) : err);
    });
    session.on('goaway', (code: number, _lastStreamId: number, debugData?: Buffer) => {
      retire();
      if (this.#keepalive !== false) this.#keepalive = afterGoaway(this.#keepalive, code, debugData);
    });
    session.on('close', () => {
      retire();
      if (!ready) reject(Object.assign(new Error('backend closed the connection'), { code: 'ECONNRESET' }));
    });
    // An idle session keeps no agent alive on its own: the tunnel's WebSocket does.
    session.unref();
    session.once('remoteSettings', () => {
      ready = true;
      session.setLocalWindowSize(SESSION_WINDOW);
      if (this.#closed) {
        session.destroy();
        reject(new Error('the tunnel is closing'));
        return;
      }
      this.#slots.push(slot);
      const keepalive = this.#keepalive;
      if (keepalive !== false) {
        keepAlive(session, keepalive, (err) => {
          retire();
          session.destroy(err);
        });
      }
      resolve();
    });
  }
}
