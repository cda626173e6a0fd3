import type { IncomingMessage } from 'node:http';
import { ErrorCode, MuxSession, type MuxStream, type ProtocolSettings } from '@tunnel2/protocol';
import type { Logger } from 'pino';
import WebSocket from 'ws';
import { linkSessionOptions } from './link-settings.js';
import { LINK_PATH, NODE_AUTH_HEADER, type NodeAuth } from './node-auth.js';
import type { HopCounters } from './node-hop.js';

/** What opening a stream to a peer came to. */
export type LinkOpening =
  | { stream: MuxStream; maxFrameSize: number }
  /** The peer does not serve links (an older node, or links disabled): use the HTTP hop. */
  | { failed: 'refused' }
  /** The peer cannot be reached (connect, upgrade or HELLO failed or timed out), or the link died. */
  | { failed: 'unreachable'; err: unknown }
  /** Too many requests already wait for this link to open, or it carries its most streams. */
  | { failed: 'full' };

export interface NodeLinkOptions {
  nodeId: string;
  auth: NodeAuth;
  protocol: Partial<ProtocolSettings>;
  maxMessageSize: number;
  /** Connect, upgrade and the peer's HELLO must all come within this. */
  connectTimeoutMs: number;
  counters: HopCounters;
  logger: Logger;
}

/** Requests that may wait for one link to open; beyond, they are answered busy at once. */
const MAX_WAITING = 1024;
/** How long a peer that refused the link is reached through the HTTP hop before the link is tried again. */
const FALLBACK_MS = 60_000;

/** Answers to a link upgrade that mean "this node has no link endpoint", not "this node is broken". */
function isNoLinkAnswer(status: number | undefined): boolean {
  return status === 404 || status === 426;
}

/**
 * This node's side of one link to one peer node: a WebSocket to the peer's LINK_PATH, opened on first
 * use and signed once, carrying a multiplexed session in which this node opens a stream per request.
 * Requests that arrive while it opens wait (bounded); a link that failed or closed is opened again on the
 * next use.
 */
class NodeLink {
  readonly #url: string;
  readonly #options: NodeLinkOptions;
  readonly #onRefused: () => void;
  #session: MuxSession | undefined;
  #ready = false;
  #waiters: ((opening: LinkOpening) => void)[] = [];
  #ws: WebSocket | undefined;

  constructor(url: string, options: NodeLinkOptions, onRefused: () => void) {
    this.#url = url;
    this.#options = options;
    this.#onRefused = onRefused;
  }

  open(done: (opening: LinkOpening) => void): void {
    const session = this.#session;
    if (session !== undefined && this.#ready && !session.draining && !session.closed) {
      done(this.#openOn(session));
      return;
    }
    if (this.#waiters.length >= MAX_WAITING) {
      done({ failed: 'full' });
      return;
    }
    this.#waiters.push(done);
    if (this.#ws === undefined) this.#connect();
  }

  #openOn(session: MuxSession): LinkOpening {
    try {
      return { stream: session.openStream(), maxFrameSize: session.peerSettings.maxFrameSize };
    } catch {
      // Its most streams, or the peer said GOAWAY in between: this request is answered busy.
      return { failed: 'full' };
    }
  }

  #settle(opening: (session: MuxSession | undefined) => LinkOpening): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const done of waiters) done(opening(this.#session));
  }

  #connect(): void {
    const url = new URL(LINK_PATH, this.#url);
    const { auth, nodeId, counters } = this.#options;
    const ws = new WebSocket(url, {
      headers: { host: url.host, [NODE_AUTH_HEADER]: auth.signLink(nodeId, url.host) },
      perMessageDeflate: false,
      maxPayload: this.#options.maxMessageSize,
      handshakeTimeout: this.#options.connectTimeoutMs,
    });
    this.#ws = ws;
    let opened = false;
    const fail = (opening: LinkOpening): void => {
      clearTimeout(timer);
      if (this.#ws === ws) this.#ws = undefined;
      this.#settle(() => opening);
    };
    // Until the peer's HELLO: a peer that accepts and then says nothing is unreachable, never a hang.
    const timer = setTimeout(() => {
      ws.terminate();
      fail({ failed: 'unreachable', err: new Error('no HELLO from the peer node in time') });
    }, this.#options.connectTimeoutMs);
    ws.once('unexpected-response', (req: { destroy(): void }, res: IncomingMessage) => {
      req.destroy();
      res.resume();
      if (isNoLinkAnswer(res.statusCode)) {
        this.#onRefused();
        fail({ failed: 'refused' });
      } else {
        fail({ failed: 'unreachable', err: new Error(`the peer node answered ${res.statusCode}`) });
      }
    });
    ws.on('error', (err) => {
      if (!opened) fail({ failed: 'unreachable', err });
      else this.#session?.transportClosed(err);
    });
    ws.once('open', () => {
      opened = true;
      const session: MuxSession = new MuxSession({
        ...linkSessionOptions('edge', this.#options.protocol),
        transport: {
          send: (message, sent) => {
            counters.bytesOut += message.length;
            ws.send(message, { binary: true, compress: false }, sent);
          },
          close: (code, reason) => ws.close(code, reason),
        },
        handler: {
          onHello: () => {
            clearTimeout(timer);
            session.sendHello({ node: nodeId }, true);
            this.#ready = true;
            this.#settle((live) => (live === undefined ? { failed: 'full' } : this.#openOn(live)));
          },
          onClose: (error) => {
            clearTimeout(timer);
            if (this.#session === session) {
              this.#session = undefined;
              this.#ready = false;
              this.#ws = undefined;
            }
            if (error !== undefined)
              this.#options.logger.warn({ err: error }, 'cluster: link to a peer node ended');
            this.#settle(() => ({ failed: 'unreachable', err: error ?? new Error('link closed') }));
          },
        },
      });
      this.#session = session;
      ws.on('message', (data, isBinary) => {
        counters.bytesIn += (data as Buffer).length;
        if (isBinary) session.receive(data as Buffer);
        else session.close(ErrorCode.PROTOCOL_ERROR, 'text messages are not part of the protocol');
      });
      ws.on('close', () => session.transportClosed());
    });
    ws.on('close', () => {
      if (!opened) fail({ failed: 'unreachable', err: new Error('the peer node closed the connection') });
    });
  }

  /** No new streams here; the next use opens a new link. Open streams finish (drain) or are reset (close). */
  close(now: boolean): void {
    const session = this.#session;
    this.#session = undefined;
    this.#ready = false;
    this.#ws = undefined;
    if (session === undefined) return;
    if (now) session.close(ErrorCode.GOING_AWAY, 'edge node stopped');
    else session.goAway(ErrorCode.GOING_AWAY, 'link replaced');
  }

  get live(): boolean {
    return this.#ready;
  }
}

/** This node's links to its peers, one per peer URL, and which peers are reached by the HTTP hop instead. */
export class NodeLinks {
  readonly #options: NodeLinkOptions;
  readonly #links = new Map<string, NodeLink>();
  /** Peer URL → until when it is reached by the HTTP hop (it refused the link). */
  readonly #fallback = new Map<string, number>();

  constructor(options: NodeLinkOptions) {
    this.#options = options;
  }

  /** Links open now (a gauge). */
  get size(): number {
    let open = 0;
    for (const link of this.#links.values()) if (link.live) open++;
    return open;
  }

  /** True when `url` refused a link lately: its requests go through the HTTP hop. */
  viaHop(url: string): boolean {
    const until = this.#fallback.get(url);
    if (until === undefined) return false;
    if (until > Date.now()) return true;
    this.#fallback.delete(url);
    return false;
  }

  /** Opens a stream to the peer at `url`: at once on a live link, or once the link is up. */
  open(url: string, done: (opening: LinkOpening) => void): void {
    let link = this.#links.get(url);
    if (link === undefined) {
      link = new NodeLink(url, this.#options, () => {
        this.#fallback.set(url, Date.now() + FALLBACK_MS);
        this.#links.delete(url);
      });
      this.#links.set(url, link);
    }
    link.open(done);
  }

  /** The peer failed: its link goes (streams still on it are reset by its death, or run out). */
  forget(url: string): void {
    const link = this.#links.get(url);
    if (link === undefined) return;
    this.#links.delete(url);
    link.close(false);
  }

  close(): void {
    for (const link of this.#links.values()) link.close(true);
    this.#links.clear();
  }
}
