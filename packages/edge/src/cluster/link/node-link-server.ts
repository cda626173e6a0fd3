import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import {
  ErrorCode,
  MuxSession,
  type MuxStream,
  type ProtocolSettings,
  sendCorkedPieces,
  TCP_STREAM_KIND,
  type WindowBudget,
} from '@tunnel2/protocol';
import type { Logger } from 'pino';
import { type WebSocket, WebSocketServer } from 'ws';
import type { SessionTable } from '../../agents/session-table.js';
import { rejectUpgrade } from '../../answers/error-response.js';
import { nodeAuthRefusal } from '../../answers/refusals.js';
import { EdgeErrorCode } from '../../errors.js';
import type { InFlight } from '../../exchange/in-flight.js';
import { NODE_AUTH_HEADER } from '../../public/cross-node.js';
import type { NodeAuth } from '../node-auth.js';
import { LinkRequest, type LinkRequestContext, type LinkTcpArrival } from './link-request.js';
import { linkSessionOptions, versionRefusal } from './link-settings.js';
import { LinkShares } from './link-shares.js';
import { NonceWindow } from './nonce-window.js';

export interface NodeLinkServerOptions {
  nodeId: string;
  auth: NodeAuth;
  sessions: SessionTable;
  inFlight: InFlight;
  maxRequestBodyBytes: number;
  maxMessageSize: number;
  protocol: Partial<ProtocolSettings>;
  /** The edge's window growth budget (`edgeWindowBudget`), which link streams draw on too. */
  windowBudget: WindowBudget;
  logger: Logger;
  /**
   * Called for an upgrade whose signature does not verify (counted as a forged node request); not for a
   * genuine one signed for another node id (answered 421 TUNNEL2_ERR_NODE_LINK_MISDIRECTED).
   */
  onForged: () => void;
  /** False once this node's public listener is closed: its links go too, as a stopped node's would. */
  isListening: () => boolean;
  /** Serves TCP connections other nodes carry here (undefined: this node has no TCP ports). */
  tcp?: LinkTcpArrival | undefined;
  /** A peer's HELLO must come within this of the upgrade (the edge's `helloTimeoutMs`, as for agents). */
  helloTimeoutMs: number;
  /** Link nonces remembered at most (default DEFAULT_MAX_NONCES); beyond, new links are refused 503. */
  maxNonces?: number;
}

/**
 * The accepting side of node-to-node links: a peer node opens one WebSocket to LINK_PATH, signed once at
 * the upgrade with the cluster secret, and runs a multiplexed session over it like an agent session with
 * the roles turned round: the peer opens a stream per public request, this node serves it from the agent
 * connected here (link-request.ts).
 */
export class NodeLinkServer {
  readonly #options: NodeLinkServerOptions;
  readonly #wss: WebSocketServer;
  readonly #links = new Set<MuxSession>();
  readonly #nonces: NonceWindow;
  #draining = false;

  constructor(options: NodeLinkServerOptions) {
    this.#options = options;
    this.#wss = new WebSocketServer({
      noServer: true,
      perMessageDeflate: false,
      maxPayload: options.maxMessageSize,
      clientTracking: false,
    });
    this.#nonces = new NonceWindow(options.maxNonces);
  }

  /** Links open to this node (a gauge). */
  get size(): number {
    return this.#links.size;
  }

  /** Streams open on the links to this node, all together. */
  get streams(): number {
    let open = 0;
    for (const link of this.#links) open += link.streams.size;
    return open;
  }

  /** Bytes queued towards the peers of the links to this node, all together. */
  get bufferedBytes(): number {
    let queued = 0;
    for (const link of this.#links) queued += link.bufferedBytes;
    return queued;
  }

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const { auth, nodeId, logger } = this.#options;
    const value = req.headers[NODE_AUTH_HEADER];
    const verified =
      typeof value === 'string' ? auth.verifyLink(value, req.headers.host ?? '', nodeId) : undefined;
    if (verified?.kind === 'old') {
      // A genuine peer of an older version: it takes 426 as "no link here" and uses the HTTP hop meanwhile.
      logger.warn(
        { peer: verified.fromNode },
        'cluster: a peer node opened a link with the older v1 handshake and was refused; it forwards over the HTTP hop until it is upgraded',
      );
      rejectUpgrade(socket, {
        code: EdgeErrorCode.NODE_LINK_VERSION,
        message: 'this node takes node links with the v2 handshake only',
      });
      return;
    }
    if (verified?.kind === 'misdirected') {
      // A holder of the secret that still believes the node that was at this address before (this node's
      // previous process: its node record and the peers' owner caches outlive it a while). Not a forgery,
      // and not counted as one: the peer forgets that node id and asks the registry again. Nothing opens,
      // so its nonce need not be remembered (a replay of it is answered the same).
      logger.debug(
        { peer: verified.fromNode, signedFor: verified.toNode },
        'cluster: a peer node opened a link for another node id than this one (a node no longer at this address)',
      );
      rejectUpgrade(socket, {
        code: EdgeErrorCode.NODE_LINK_MISDIRECTED,
        message: `this node is ${nodeId}, not ${verified.toNode}: ask the registry where that node is now`,
      });
      return;
    }
    // The nonce is remembered only once the signature verified: no one without the secret can fill the set.
    const admission =
      verified === undefined ? undefined : this.#nonces.admit(verified.nonce, verified.expiresAt);
    if (admission === 'full') {
      rejectUpgrade(socket, {
        code: EdgeErrorCode.NODE_LINK_BUSY,
        message: 'too many node links opened lately',
        retryAfterS: 1,
      });
      return;
    }
    if (verified === undefined || admission !== 'fresh') {
      this.#options.onForged();
      rejectUpgrade(socket, nodeAuthRefusal);
      return;
    }
    if (this.#draining) {
      rejectUpgrade(socket, { code: EdgeErrorCode.DRAINING, message: 'edge node is shutting down' });
      return;
    }
    this.#wss.handleUpgrade(req, socket, head, (ws) =>
      this.#accept(ws, socket, verified.fromNode, auth.proveLink(verified.fromNode, nodeId, verified.nonce)),
    );
  }

  /** `proof`: this node's answer to the link's nonce, sent in its HELLO (see NodeAuth.proveLink). */
  #accept(ws: WebSocket, socket: Duplex, peer: string, proof: string): void {
    const log = this.#options.logger.child({ link: peer });
    const spliced = new Set<MuxStream>();
    const inFlight = this.#options.inFlight;
    const context: Omit<LinkRequestContext, 'shares'> = {
      sessions: this.#options.sessions,
      socket,
      maxRequestBodyBytes: this.#options.maxRequestBodyBytes,
      tcp: this.#options.tcp,
      started(link: MuxStream): void {
        spliced.add(link);
        inFlight.start();
      },
    };
    const session: MuxSession = new MuxSession({
      ...linkSessionOptions('agent', this.#options.protocol, this.#options.windowBudget),
      transport: {
        // Fragments, all of a message in one write: the ingress takes them as views of its reads.
        sendPieces: (pieces, _size, done) => sendCorkedPieces(ws, socket, pieces, done),
        close: (code, reason) => ws.close(code, reason),
      },
      handler: {
        onHello: (hello) => {
          clearTimeout(helloTimer);
          const refusal = versionRefusal(hello);
          if (refusal !== undefined) {
            log.warn({ reason: refusal }, 'cluster: a peer node speaks no protocol version this node does');
            session.close(ErrorCode.VERSION_UNSUPPORTED, refusal);
          }
        },
        onStream: (stream) => {
          if (!this.#options.isListening()) {
            session.close(ErrorCode.GOING_AWAY, 'node stopped listening');
            return;
          }
          new LinkRequest(stream, linkContext);
        },
        onStreamError: (stream, err) => log.error({ err, stream: stream.id }, 'link stream handler failed'),
        onStreamClosed: (stream) => {
          shares.release(stream);
          if (spliced.delete(stream)) inFlight.finish();
        },
        onClose: (error) => {
          clearTimeout(helloTimer);
          this.#links.delete(session);
          for (const _ of spliced) inFlight.finish();
          spliced.clear();
          if (error !== undefined) log.warn({ err: error }, 'cluster: link from a peer node ended');
        },
      },
    });
    const shares = new LinkShares(session.windowBudget);
    const linkContext: LinkRequestContext = { ...context, shares };
    this.#links.add(session);
    // A peer that authenticated and then says nothing would hold its socket for good: no heartbeat runs
    // before both HELLOs.
    const { helloTimeoutMs } = this.#options;
    const helloTimer = setTimeout(() => {
      session.close(ErrorCode.PROTOCOL_ERROR, `no HELLO within ${helloTimeoutMs} ms`);
    }, helloTimeoutMs);
    // Whole messages here, unlike everywhere else: this side splices DATA on to its agents, and pieces of
    // fragments would go on as smaller frames that the agent pays for (measured: +10 % agent CPU on a
    // cross-node upload, bench/README.md "Node links").
    ws.on('message', (data, isBinary) => {
      if (isBinary) session.receive(data as Buffer);
      else session.close(ErrorCode.PROTOCOL_ERROR, 'text messages are not part of the protocol');
    });
    ws.on('close', () => session.transportClosed());
    ws.on('error', (err) => session.transportClosed(err));
    // The accepting side speaks first, as an agent does; the peer answers with its own HELLO. Listing TCP
    // streams is what lets a peer carry TCP connections here: an older node lists nothing and is not sent any.
    session.sendHello(
      {
        node: this.#options.nodeId,
        linkProof: proof,
        ...(this.#options.tcp === undefined ? {} : { streamKinds: [TCP_STREAM_KIND] }),
      },
      false,
    );
  }

  /** No new links or streams; open streams run to completion (peers send new requests elsewhere). */
  drain(): void {
    this.#draining = true;
    for (const link of this.#links) link.goAway(ErrorCode.GOING_AWAY, 'edge node draining');
  }

  close(): void {
    this.#draining = true;
    for (const link of [...this.#links]) link.close(ErrorCode.GOING_AWAY, 'edge node stopped');
    this.#wss.close();
  }
}
