import type { Duplex } from 'node:stream';
import {
  decodeRequestHead,
  decodeTcpHead,
  ErrorCode,
  encodeResponseHead,
  isGrpcContentType,
  isProtocolError,
  type MuxStream,
  type RequestHead,
  type StreamHandler,
  type TcpHead,
} from '@tunnel2/protocol';
import type { SessionTable } from '../../agents/session-table.js';
import type { TunnelEntry } from '../../agents/tunnel-entry.js';
import { askOfFields } from '../../answers/error-page.js';
import { edgeAnswer } from '../../answers/error-response.js';
import { publishRefusal } from '../../answers/refusal-channel.js';
import type { Refusal } from '../../answers/refusals.js';
import { acquireStream, admit, encodeTunnelHead, type SlotClaimant } from '../../public/admission.js';
import { restateGrpcTimeout } from '../../public/call-deadline.js';
import { LINK_CLIENT_HEADER, LINK_SESSION_HEADER } from '../../public/cross-node.js';
import type { LinkShares } from './link-shares.js';
import { StreamSplice } from './stream-splice.js';

/** Where a link stream opened with a TCP head goes (the node's TCP ports, see shared-tcp-ports.ts). */
export interface LinkTcpArrival {
  arrive(link: MuxStream, head: TcpHead, started: (link: MuxStream) => void): void;
  /** Whom the port counts against, while this node holds it (its link share is counted by it too). */
  accountOf(port: number): string | undefined;
}

export interface LinkRequestContext {
  sessions: SessionTable;
  /** This node's TCP ports, if it serves TCP tunnels: a link stream with a TCP head is one of their connections. */
  tcp: LinkTcpArrival | undefined;
  /** The link's connection: refusals made here are counted on it (this node's public listener took it). */
  socket: Duplex;
  maxRequestBodyBytes: number;
  /**
   * The link's streams by tenant: a request body's window growth here is bounded by its tenant's share
   * (the ingress, which opens the streams, bounds their number).
   */
  shares: LinkShares;
  /** The link stream now carries a request to an agent (in flight until the link stream closes). */
  started(link: MuxStream): void;
}

/** A refusal's head is a few hundred bytes: far below the smallest frame limit a peer may announce. */
const REFUSAL_HEAD_LIMIT = 16 * 1024;

/** What the ingress put at the end of the head for this node, and the head the agent gets without it. */
function takeMetadata(head: RequestHead): { name: string; client: string } | undefined {
  const fields = head.headers;
  const n = fields.length;
  // The ingress writes them last, in this order and case; anything else is not a head from a node.
  if (n < 4 || fields[n - 4] !== LINK_SESSION_HEADER || fields[n - 2] !== LINK_CLIENT_HEADER)
    return undefined;
  const meta = { name: fields[n - 3]!, client: fields[n - 1]! };
  fields.length = n - 4;
  return meta;
}

/** The two fields the checks read, in one pass; the rest of the head goes to the agent untouched. */
function admissionFields(fields: string[]): {
  authorization: string | undefined;
  declaredLength: number;
  grpc: boolean;
} {
  let authorization: string | undefined;
  let declaredLength = 0;
  let grpc = false;
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    if (name.length === 13 && name.toLowerCase() === 'authorization') authorization = fields[i + 1];
    else if (name.length === 14 && name.toLowerCase() === 'content-length')
      declaredLength = Number(fields[i + 1]);
    else if (name.length === 12 && name.toLowerCase() === 'content-type')
      grpc = isGrpcContentType(fields[i + 1]);
  }
  return { authorization, declaredLength, grpc };
}

/**
 * One request another node carried here over a link: its head decoded, this node's metadata taken out,
 * the same checks as for a request arriving here (protection with the client address the ingress decided
 * on, drain, rate, body limit, stream slots with their wait), then the agent's stream spliced to the link
 * stream. Refusals go back as an ordinary response on the link stream; a session that is not live here
 * is answered with REFUSED_STREAM, "not processed": the ingress sends the request elsewhere or says so.
 * Body bytes that arrive before the agent's stream opens are held (bounded by the link stream's window).
 */
export class LinkRequest implements StreamHandler, SlotClaimant {
  readonly #stream: MuxStream;
  readonly #context: LinkRequestContext;
  #early: Buffer[] = [];
  #ended = false;
  /** Refused: what the ingress still sends is read and dropped. */
  #discarding = false;
  #goneWatchers: (() => void)[] = [];
  #headSeen = false;
  /** The request's head, once read: a refusal takes the form its client asked for (read only then). */
  #head: RequestHead | undefined;

  /** The session it goes to is one replica of its name (stream-splice.ts passes its refusal on as is). */
  #replica = false;
  /**
   * A gRPC call: when its head arrived here (0 for other requests) and the session it waits for. The
   * ingress times the call and stated the time left in its grpc-timeout; a wait here for a stream slot is
   * taken off that before the agent sees it.
   */
  #grpcSince = 0;
  #connection: TunnelEntry | undefined;

  constructor(stream: MuxStream, context: LinkRequestContext) {
    this.#stream = stream;
    this.#context = context;
    stream.handler = this;
  }

  get gone(): boolean {
    return this.#stream.closed;
  }

  onHeaders(payload: Buffer, endStream: boolean): void {
    if (this.#headSeen) {
      // Trailers of the request body before the agent's stream opened: not carried (the ingress sends none).
      if (endStream) this.onEnd();
      return;
    }
    this.#headSeen = true;
    if (endStream) this.#ended = true;
    // A TCP head starts with a zero byte, where a request head's method length (never 0) is.
    if (payload[0] === 0) {
      this.#arriveTcp(payload, endStream);
      return;
    }
    let head: RequestHead;
    try {
      head = decodeRequestHead(payload);
    } catch (err) {
      if (!isProtocolError(err)) throw err;
      this.#stream.reset(ErrorCode.PROTOCOL_ERROR);
      return;
    }
    const meta = takeMetadata(head);
    if (meta === undefined) {
      this.#stream.reset(ErrorCode.PROTOCOL_ERROR);
      return;
    }
    this.#head = head;
    const connection = this.#context.sessions.get(meta.name);
    if (connection === undefined || !connection.ready || connection.session.draining) {
      this.#stream.reset(ErrorCode.REFUSED_STREAM);
      return;
    }
    this.#replica = connection.replica;
    const fields = admissionFields(head.headers);
    if (fields.grpc) {
      this.#grpcSince = performance.now();
      this.#connection = connection;
    }
    const refusal = admit(
      connection,
      meta.name,
      { ...fields, clientAddress: meta.client },
      this.#context.maxRequestBodyBytes,
    );
    if (refusal !== undefined) {
      this.refuse(refusal);
      return;
    }
    this.#context.shares.hold(this.#stream, {
      session: meta.name,
      account: connection.account,
      client: meta.client,
    });
    // The request body's window, without waiting for it to grow (none for a bodyless one: it has ended).
    this.#context.shares.grantEager(this.#stream);
    const encoded = encodeTunnelHead(head, connection);
    if ('refusal' in encoded) this.refuse(encoded.refusal);
    else acquireStream(connection, meta.name, this, encoded.payload);
  }

  /** A TCP connection another node accepted: handed to this node's TCP ports, or reset if it has none. */
  #arriveTcp(payload: Buffer, endStream: boolean): void {
    let head: TcpHead;
    try {
      head = decodeTcpHead(payload);
    } catch (err) {
      if (!isProtocolError(err)) throw err;
      this.#stream.reset(ErrorCode.PROTOCOL_ERROR);
      return;
    }
    const tcp = this.#context.tcp;
    // The ingress sends the client's bytes only after the head: a head with END_STREAM is malformed.
    if (tcp === undefined || endStream) {
      this.#stream.reset(tcp === undefined ? ErrorCode.REFUSED_STREAM : ErrorCode.PROTOCOL_ERROR);
      return;
    }
    this.#context.shares.hold(this.#stream, {
      session: `tcp:${head.port}`,
      account: tcp.accountOf(head.port),
      client: head.clientAddress,
    });
    this.#context.shares.grantEager(this.#stream);
    tcp.arrive(this.#stream, head, this.#context.started);
  }

  onData(chunk: Buffer): void {
    if (this.#discarding) this.#stream.consume(chunk.length);
    else this.#early.push(chunk);
  }

  onEnd(): void {
    this.#ended = true;
  }

  onReset(): void {
    this.#early = [];
    const watchers = this.#goneWatchers;
    this.#goneWatchers = [];
    for (const onGone of watchers) onGone();
  }

  onDrain(): void {}

  /**
   * The agent went away before the request got a stream: a bodyless one goes back to the ingress node,
   * which sends it elsewhere; one with a body (or not known to have none yet) is refused here as busy, as
   * one edge does, for the ingress could not send it again anyway.
   */
  elsewhere(): boolean {
    if (!this.#ended || this.#early.length > 0) return false;
    this.#stream.reset(ErrorCode.REFUSED_STREAM);
    return true;
  }

  watch(onGone: () => void): () => void {
    this.#goneWatchers.push(onGone);
    return () => {
      this.#goneWatchers = this.#goneWatchers.filter((w) => w !== onGone);
    };
  }

  start(agent: MuxStream, payload: Buffer): void {
    const head = this.#head;
    this.#head = undefined;
    // A gRPC call that waited here for a stream slot: its agent is told the time left now.
    const waited = this.#grpcSince === 0 ? 0 : performance.now() - this.#grpcSince;
    if (waited >= 1 && head !== undefined && this.#connection !== undefined) {
      if (restateGrpcTimeout(head.headers, waited)) {
        const encoded = encodeTunnelHead(head, this.#connection);
        if ('payload' in encoded) payload = encoded.payload;
      }
    }
    this.#connection = undefined;
    this.#context.started(this.#stream);
    const early = this.#early;
    this.#early = [];
    const bodyless = this.#ended && early.length === 0;
    agent.sendHeaders(payload, bodyless);
    const splice = new StreamSplice(this.#stream, agent, this.#replica);
    if (!bodyless) splice.replay(early, this.#ended);
  }

  /**
   * An answer of this node's own, as the edge writes it on a public connection, counted here (where it is
   * made, as for a request that came by the HTTP hop) on the link's connection.
   */
  refuse(refusal: Refusal): void {
    const stream = this.#stream;
    if (stream.closed) return;
    this.#discarding = true;
    let early = 0;
    for (const chunk of this.#early) early += chunk.length;
    this.#early = [];
    stream.consume(early);
    // What the public client asked for, read from the head the ingress carried here: the refusal is relayed
    // to that client as it is, so its form must be the one the client's Accept chose.
    const head = this.#head;
    const ask =
      head === undefined
        ? undefined
        : { ...askOfFields(head.method, head.headers), grpc: admissionFields(head.headers).grpc };
    const answer = edgeAnswer(refusal.code, refusal.message, refusal.retryAfterS, refusal.headers, ask);
    stream.sendHeaders(
      encodeResponseHead(
        { status: answer.status, statusMessage: '', headers: answer.headers },
        REFUSAL_HEAD_LIMIT,
      ),
      false,
    );
    if (answer.body.length > 0) stream.write(answer.body);
    stream.end();
    publishRefusal(this.#context.socket, refusal.code);
  }
}
