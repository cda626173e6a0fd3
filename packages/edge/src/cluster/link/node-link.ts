import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import {
  ErrorCode,
  type Hello,
  MuxSession,
  type MuxStream,
  maskingNeeded,
  type ProtocolSettings,
  sendCorkedPieces,
  TCP_STREAM_KIND,
  type WindowBudget,
  zeroMask,
} from '@tunnel2/protocol';
import type { Logger } from 'pino';
import WebSocket from 'ws';
import { NODE_AUTH_HEADER } from '../../public/cross-node.js';
import { LINK_PATH, type NodeAuth } from '../node-auth.js';
import type { HopCounters } from '../node-hop.js';
import { linkSessionOptions, versionRefusal } from './link-settings.js';
import { LinkShares, type LinkTenant } from './link-shares.js';

/** What opening a stream to a peer came to. */
export type LinkOpening =
  /** `tcp`: the peer's HELLO listed TCP streams (a node from before cluster TCP would refuse one). */
  | { stream: MuxStream; maxFrameSize: number; tcp: boolean }
  /** The peer does not serve links (an older node, or links disabled): use the HTTP hop. */
  | { failed: 'refused' }
  /**
   * The node at the peer's address is another node (421: a genuine link signed for another node id): the
   * node id asked for is gone from there, e.g. that node restarted with a new id. The address is fine.
   */
  | { failed: 'misdirected' }
  /** The peer cannot be reached (connect, upgrade or HELLO failed or timed out), or the link died. */
  | { failed: 'unreachable'; err: unknown }
  /** Too many requests already wait for this link to open, or it carries its most streams. */
  | { failed: 'full' }
  /** The request's tenant (its session, account or client address) holds its whole share of the link. */
  | { failed: 'share' }
  /** This node stops (its links are closed): nothing new leaves it, and the peer is not at fault. */
  | { failed: 'stopping' };

export interface NodeLinkOptions {
  nodeId: string;
  auth: NodeAuth;
  protocol: Partial<ProtocolSettings>;
  maxMessageSize: number;
  /** The edge's window growth budget (`edgeWindowBudget`), which link streams draw on too. */
  windowBudget: WindowBudget;
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
 * A link upgrade refused for its signature: the peer is a node from before the v2 handshake (it verifies
 * link upgrades as v1), or it holds another secret. Either way the HTTP hop is what can still work.
 */
function isSignatureRefused(status: number | undefined): boolean {
  return status === 403;
}

/**
 * A link upgrade whose signature verified at the peer but names another node id than the peer's (421
 * TUNNEL2_ERR_NODE_LINK_MISDIRECTED): the node asked for no longer listens there. Not a reason for the HTTP
 * hop: the node that does listen there takes links, only under its own id.
 */
function isMisdirected(status: number | undefined): boolean {
  return status === 421;
}

/** A peer node as the registry names it: its id (signed into the link upgrade) and where it listens. */
export interface LinkPeer {
  nodeId: string;
  url: string;
}

/**
 * This node's side of one link to one peer node: a WebSocket to the peer's LINK_PATH, opened on first
 * use and signed once, carrying a multiplexed session in which this node opens a stream per request.
 * Requests that arrive while it opens wait (bounded); a link that failed or closed is opened again on the
 * next use, and one that takes no new streams (the peer's GOAWAY, its stream ids used up) is replaced: it
 * finishes its streams and closes once idle.
 */
class NodeLink {
  /** The peer's address. */
  readonly url: string;
  /** The peer's node id: the link upgrade is signed for it, and only it can answer the signature. */
  readonly nodeId: string;
  readonly #options: NodeLinkOptions;
  readonly #onRefused: () => void;
  readonly #onEnded: () => void;
  #session: MuxSession | undefined;
  #ready = false;
  /** The peer of the live link takes TCP streams (its HELLO said so). */
  #tcp = false;
  /** The live link's streams by tenant (link-shares.ts). */
  #shares: LinkShares | undefined;
  #waiters: { tenant: LinkTenant; done: (opening: LinkOpening) => void }[] = [];
  #ws: WebSocket | undefined;

  /**
   * `onRefused`: the peer takes no link (the HTTP hop serves it meanwhile). `onEnded`: this link is over
   * (it failed to open, was refused, or closed), called before its waiters hear so: the next use opens a
   * new one.
   */
  constructor(peer: LinkPeer, options: NodeLinkOptions, onRefused: () => void, onEnded: () => void) {
    this.url = peer.url;
    this.nodeId = peer.nodeId;
    this.#options = options;
    this.#onRefused = onRefused;
    this.#onEnded = onEnded;
  }

  open(tenant: LinkTenant, done: (opening: LinkOpening) => void): void {
    const session = this.#session;
    if (session !== undefined && this.#ready) {
      const opening = session.draining || session.closed ? 'replace' : this.#openOn(session, tenant);
      if (opening !== 'replace') {
        done(opening);
        return;
      }
      // This link takes no new streams: the request waits for its successor instead of for its end.
      this.#retire(false);
    }
    if (this.#waiters.length >= MAX_WAITING) {
      done({ failed: 'full' });
      return;
    }
    this.#waiters.push({ tenant, done });
    if (this.#ws === undefined) this.#connect();
  }

  /**
   * A stream on the live link, counted against its tenant's share; 'replace' when the link itself can take
   * no more (not just busy now).
   */
  #openOn(session: MuxSession, tenant: LinkTenant): LinkOpening | 'replace' {
    const shares = this.#shares;
    if (shares !== undefined && !shares.admits(tenant)) return { failed: 'share' };
    const busy = session.streams.size >= session.peerSettings.maxConcurrentStreams;
    let stream: MuxStream;
    try {
      stream = session.openStream();
    } catch {
      // Its most streams at once: this request is answered busy. Otherwise its stream ids ran out, or
      // it started draining in between: a new link serves it.
      return busy ? { failed: 'full' } : 'replace';
    }
    if (shares !== undefined) {
      shares.hold(stream, tenant);
      // The response's window, without waiting for it to grow (its WINDOW_UPDATE follows the head).
      shares.grantEager(stream);
    }
    return { stream, maxFrameSize: session.peerSettings.maxFrameSize, tcp: this.#tcp };
  }

  #settle(opening: (session: MuxSession | undefined, tenant: LinkTenant) => LinkOpening): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const { tenant, done } of waiters) done(opening(this.#session, tenant));
  }

  #connect(): void {
    const url = new URL(LINK_PATH, this.url);
    const { auth, nodeId, counters, logger } = this.#options;
    const peerId = this.nodeId;
    const signed = auth.signLink(nodeId, peerId, url.host);
    const ws = new WebSocket(url, {
      headers: { host: url.host, [NODE_AUTH_HEADER]: signed.value },
      perMessageDeflate: false,
      // A peer over TLS or on loopback: a zero mask spares a copy of every byte sent (see maskingNeeded).
      ...(maskingNeeded(url.href) ? {} : { generateMask: zeroMask }),
      maxPayload: this.#options.maxMessageSize,
      handshakeTimeout: this.#options.connectTimeoutMs,
    });
    this.#ws = ws;
    // Fragments, not joined messages: the session decodes them in place (no copy of a message spanning reads).
    ws.binaryType = 'fragments';
    // The connection beneath the WebSocket, once upgraded: ws takes over the response's socket.
    let beneath: Socket | undefined;
    ws.once('upgrade', (response: IncomingMessage) => {
      beneath = response.socket;
    });
    let opened: MuxSession | undefined;
    // Only while this socket is still the link's: a replaced or closed one has no say over the waiters.
    const fail = (opening: LinkOpening): void => {
      clearTimeout(timer);
      if (this.#ws !== ws) return;
      this.#ws = undefined;
      this.#onEnded();
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
      if (isMisdirected(res.statusCode)) {
        // Its owner cache or the registry still named a node that left this address: the caller forgets it.
        logger.debug(
          { peer: peerId, url: this.url },
          "cluster: the node at a peer node's address is another node now; asking the registry again",
        );
        fail({ failed: 'misdirected' });
      } else if (isNoLinkAnswer(res.statusCode)) {
        this.#onRefused();
        fail({ failed: 'refused' });
      } else if (isSignatureRefused(res.statusCode)) {
        logger.warn(
          { peer: peerId, url: this.url },
          "cluster: a peer node refused this node's link signature (a node from before the v2 link handshake, or another cluster secret); forwarding to it over the HTTP hop",
        );
        this.#onRefused();
        fail({ failed: 'refused' });
      } else {
        fail({ failed: 'unreachable', err: new Error(`the peer node answered ${res.statusCode}`) });
      }
    });
    ws.on('error', (err) => {
      if (opened === undefined) fail({ failed: 'unreachable', err });
      else opened.transportClosed(err);
    });
    ws.once('open', () => {
      const session: MuxSession = new MuxSession({
        ...linkSessionOptions('edge', this.#options.protocol, this.#options.windowBudget),
        transport: {
          sendPieces: (pieces, size, sent) => {
            counters.bytesOut += size;
            // Fragments, all of a message in one write: the peer's receive takes them as views.
            sendCorkedPieces(ws, beneath, pieces, sent);
          },
          close: (code, reason) => ws.close(code, reason),
        },
        handler: {
          onHello: (hello: Hello) => {
            clearTimeout(timer);
            // Whoever accepted must prove the secret too: a link led to another listener (a forged node
            // address) carries nothing, and its waiters hear the peer is unreachable.
            if (!auth.checkLinkProof(hello.meta.linkProof, nodeId, peerId, signed.nonce)) {
              logger.warn(
                { peer: peerId, url: this.url },
                "cluster: the node at a peer's address did not prove the cluster secret; link closed",
              );
              session.close(ErrorCode.PROTOCOL_ERROR, 'no proof of the cluster secret');
              return;
            }
            const refusal = versionRefusal(hello);
            if (refusal !== undefined) {
              logger.warn(
                { peer: peerId, reason: refusal },
                'cluster: a peer node speaks no protocol version this node does',
              );
              session.close(ErrorCode.VERSION_UNSUPPORTED, refusal);
              return;
            }
            session.sendHello({ node: nodeId }, true);
            if (this.#session !== session) return;
            this.#ready = true;
            const kinds = hello.meta.streamKinds;
            this.#tcp = Array.isArray(kinds) && kinds.includes(TCP_STREAM_KIND);
            this.#settle((live, tenant) => {
              const opening = live === undefined ? 'replace' : this.#openOn(live, tenant);
              return opening === 'replace' ? { failed: 'full' } : opening;
            });
          },
          // A link that takes no new streams is closed once its last stream ends (else both nodes would
          // keep it alive by heartbeats for nothing).
          // Checked after the frame or close that led here is fully handled, not inside it.
          onGoAway: () => setImmediate(closeIfIdle, session),
          onIdle: () => {
            if (session.draining) setImmediate(closeIfIdle, session);
          },
          onStreamClosed: (stream) => shares.release(stream),
          onClose: (error) => {
            clearTimeout(timer);
            if (error !== undefined)
              this.#options.logger.warn({ err: error }, 'cluster: link to a peer node ended');
            if (this.#session !== session) return;
            this.#session = undefined;
            this.#shares = undefined;
            this.#ready = false;
            this.#ws = undefined;
            this.#onEnded();
            this.#settle(() => ({ failed: 'unreachable', err: error ?? new Error('link closed') }));
          },
        },
      });
      const shares = new LinkShares(session.windowBudget);
      opened = session;
      this.#session = session;
      this.#shares = shares;
      ws.on('message', (data, isBinary) => {
        // A text message comes joined (one Buffer), not as fragments: refused before anything counts it.
        if (!isBinary) {
          session.close(ErrorCode.PROTOCOL_ERROR, 'text messages are not part of the protocol');
          return;
        }
        const fragments = data as Buffer[];
        for (const fragment of fragments) counters.bytesIn += fragment.length;
        session.receive(fragments);
      });
      ws.on('close', () => session.transportClosed());
    });
    ws.on('close', () => {
      if (opened === undefined)
        fail({ failed: 'unreachable', err: new Error('the peer node closed the connection') });
    });
  }

  /**
   * No new streams here; the next use opens a new link. `now`: open streams are reset (the node stops);
   * otherwise they finish and the link closes once idle. A link still opening is cut off, and the
   * requests waiting for it hear it is unreachable.
   */
  close(now: boolean): void {
    this.#retire(now);
    this.#settle(() => ({ failed: 'unreachable', err: new Error('link closed') }));
  }

  #retire(now: boolean): void {
    const session = this.#session;
    const ws = this.#ws;
    const ready = this.#ready;
    this.#session = undefined;
    this.#shares = undefined;
    this.#ready = false;
    this.#ws = undefined;
    if (session === undefined) {
      ws?.terminate();
    } else if (now || !ready) {
      session.close(ErrorCode.GOING_AWAY, 'edge node stopped');
    } else {
      session.goAway(ErrorCode.GOING_AWAY, 'link replaced');
      closeIfIdle(session);
    }
  }

  get live(): boolean {
    return this.#ready;
  }
}

/** A draining link without streams has nothing left to carry. */
function closeIfIdle(session: MuxSession): void {
  if (session.draining && session.streams.size === 0)
    session.close(ErrorCode.NO_ERROR, 'link idle after GOAWAY');
}

/** The map key of a peer's link: its node id and its address (see NodeLinks). */
function linkKey(peer: LinkPeer): string {
  return `${peer.nodeId} ${peer.url}`;
}

/**
 * This node's links to its peers, one per peer node id and URL, and which peer URLs are reached by the HTTP
 * hop instead. Keyed by both, not by URL alone: when a peer restarts at the same address with a new id,
 * requests that still name its old id (owner-cache entries, its node record until its TTL) must not close
 * the link to the new one. The old id's link is refused 421 (or died with its node) and removes only itself.
 */
export class NodeLinks {
  readonly #options: NodeLinkOptions;
  readonly #links = new Map<string, NodeLink>();
  /** Peer URL → until when it is reached by the HTTP hop (it refused the link). */
  readonly #fallback = new Map<string, number>();
  /** After close, no new link: its open WebSocket would hold a stopped node's process open. */
  #closed = false;

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

  /**
   * Opens a stream to `peer` for `tenant`: at once on a live link, or once the link is up; refused
   * ('share') when the tenant holds its whole share of the link.
   */
  open(peer: LinkPeer, tenant: LinkTenant, done: (opening: LinkOpening) => void): void {
    if (this.#closed) {
      done({ failed: 'stopping' });
      return;
    }
    const { url } = peer;
    const key = linkKey(peer);
    let link = this.#links.get(key);
    if (link === undefined) {
      const made: NodeLink = new NodeLink(
        peer,
        this.#options,
        () => this.#fallback.set(url, Date.now() + FALLBACK_MS),
        // Only its own entry: a newer link for the same peer may have taken the key meanwhile.
        () => {
          if (this.#links.get(key) === made) this.#links.delete(key);
        },
      );
      link = made;
      this.#links.set(key, link);
    }
    link.open(tenant, done);
  }

  /**
   * The peer failed: its link goes (streams still on it are reset by its death, or run out). With `nodeId`,
   * only that node's link at `url` (another node may answer there now); without, every link to `url`.
   */
  forget(url: string, nodeId?: string): void {
    for (const [key, link] of [...this.#links]) {
      if (link.url !== url || (nodeId !== undefined && link.nodeId !== nodeId)) continue;
      this.#links.delete(key);
      link.close(false);
    }
  }

  close(): void {
    this.#closed = true;
    for (const link of this.#links.values()) link.close(true);
    this.#links.clear();
  }
}
