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
import { rejectUpgrade } from '../error-response.js';
import { EdgeErrorCode } from '../errors.js';
import type { InFlight } from '../in-flight.js';
import { nodeAuthRefusal } from '../refusals.js';
import type { SessionTable } from '../session-table.js';
import { LinkRequest, type LinkRequestContext, type LinkTcpArrival } from './link-request.js';
import { linkSessionOptions } from './link-settings.js';
import { LinkShares } from './link-shares.js';
import { NODE_AUTH_HEADER, type NodeAuth } from './node-auth.js';

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
  /** Called for an upgrade whose signature does not verify (counted as a forged node request). */
  onForged: () => void;
  /** False once this node's public listener is closed: its links go too, as a stopped node's would. */
  isListening: () => boolean;
  /** Serves TCP connections other nodes carry here (undefined: this node has no TCP ports). */
  tcp?: LinkTcpArrival | undefined;
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
  #draining = false;

  constructor(options: NodeLinkServerOptions) {
    this.#options = options;
    this.#wss = new WebSocketServer({
      noServer: true,
      perMessageDeflate: false,
      maxPayload: options.maxMessageSize,
      clientTracking: false,
    });
  }

  /** Links open to this node (a gauge). */
  get size(): number {
    return this.#links.size;
  }

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const value = req.headers[NODE_AUTH_HEADER];
    const verified =
      typeof value === 'string' ? this.#options.auth.verifyLink(value, req.headers.host ?? '') : undefined;
    if (verified === undefined) {
      this.#options.onForged();
      rejectUpgrade(socket, nodeAuthRefusal);
      return;
    }
    if (this.#draining) {
      rejectUpgrade(socket, { code: EdgeErrorCode.DRAINING, message: 'edge node is shutting down' });
      return;
    }
    this.#wss.handleUpgrade(req, socket, head, (ws) => this.#accept(ws, socket, verified.fromNode));
  }

  #accept(ws: WebSocket, socket: Duplex, peer: string): void {
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
        onHello: () => {},
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
