import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIP, connect as netConnect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { pipeline, Readable } from 'node:stream';
import { withoutHopByHop } from '@tunnel2/protocol';
import type { Dispatcher, Pool } from 'undici';
import { EdgeErrorCode } from '../errors.js';
import { writeInformational } from '../exchange/informational.js';
import { isIdempotent, pairs } from '../exchange/raw-http.js';
import type { OwnerEntry } from '../public/cross-node.js';

// Not an `import`: an ESM import of node:http also loads Node's bundled undici (README.md, "Development").
// node:https and node:tls load with the first TLS peer: an edge whose links are plain never needs them.
const { request: httpRequest } = process.getBuiltinModule('node:http');

type DispatchController = Parameters<NonNullable<Dispatcher.DispatchHandler['onResponseStart']>>[0];

/** A peer node that accepted the request but sent no head in time (the Expect path's own timer). */
class NodeHopTimeout extends Error {
  readonly code = 'TUNNEL2_ERR_NODE_HOP_TIMEOUT';
}

function rawStrings(raw: Buffer[] | string[] | null | undefined): string[] {
  if (!Array.isArray(raw)) return [];
  return raw.map((v) => (typeof v === 'string' ? v : v.toString('latin1')));
}

/** Where a peer's public port is, from its announced URL (IPv6 brackets removed for the socket APIs). */
function peerAddress(ownerUrl: string): { secure: boolean; host: string; port: number; protocol: string } {
  const url = new URL(ownerUrl);
  const secure = url.protocol === 'https:';
  return {
    secure,
    protocol: url.protocol,
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: Number(url.port || (secure ? 443 : 80)),
  };
}

function field(raw: string[], name: string): string | undefined {
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === name) return raw[i + 1];
  return undefined;
}

/**
 * The peer's answer, relayed into the client's response as undici hands it over: interim heads as 1xx,
 * the final head with its raw fields, body chunks with pause/resume on the client's drain, trailers.
 */
class HopRelay implements Dispatcher.DispatchHandler {
  readonly #req: IncomingMessage;
  readonly #res: ServerResponse;
  readonly #counters: HopCounters;
  readonly #done: (outcome: HopOutcome, detail: { err?: unknown; edgeError?: string }) => void;
  #controller: DispatchController | undefined;
  #edgeError: string | undefined;
  #settled = false;
  /** Set when the owner said "not here" to a reroutable request: nothing of it reached the client. */
  #moved = false;
  readonly #reroutable: boolean;
  readonly #onClientGone = (): void => {
    if (!this.#res.writableFinished && this.#controller !== undefined && !this.#controller.aborted) {
      this.#controller.abort(new Error('the client went away'));
    }
  };
  readonly #onDrain = (): void => this.#controller?.resume();

  constructor(
    req: IncomingMessage,
    res: ServerResponse,
    counters: HopCounters,
    done: (outcome: HopOutcome, detail: { err?: unknown; edgeError?: string }) => void,
    reroutable: boolean,
  ) {
    this.#req = req;
    this.#res = res;
    this.#counters = counters;
    this.#done = done;
    this.#reroutable = reroutable;
    res.once('close', this.#onClientGone);
    res.on('drain', this.#onDrain);
  }

  #finish(outcome: HopOutcome, err?: unknown): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#res.off('close', this.#onClientGone);
    this.#res.off('drain', this.#onDrain);
    this.#done(outcome, {
      ...(err === undefined ? {} : { err }),
      ...(this.#edgeError === undefined ? {} : { edgeError: this.#edgeError }),
    });
  }

  /**
   * TUNNEL_OFFLINE is also the owner's answer when its agent disconnected after it got the request: a
   * method that must not run twice (RFC 9110 §9.2.2) is answered with it, as one node would.
   */
  #unprocessed(code: string | undefined): boolean {
    return code !== EdgeErrorCode.TUNNEL_OFFLINE || isIdempotent(this.#req.method);
  }

  onRequestStart(controller: DispatchController): void {
    this.#controller = controller;
    if (this.#res.destroyed) controller.abort(new Error('the client went away'));
  }

  onResponseStart(
    controller: DispatchController,
    statusCode: number,
    _headers: unknown,
    statusMessage?: string,
  ): void {
    const raw = rawStrings(controller.rawHeaders as Buffer[] | string[] | null | undefined);
    if (this.#res.destroyed) {
      controller.abort(new Error('the client went away'));
      return;
    }
    if (statusCode < 200) {
      writeInformational(this.#req, this.#res, statusCode, statusMessage ?? '', raw);
      return;
    }
    this.#edgeError = field(raw, 'x-tunnel2-error');
    if (this.#reroutable && isNotHere(this.#edgeError) && this.#unprocessed(this.#edgeError)) {
      // The session left that node (its agent reconnected elsewhere, or that node drains): the caller
      // looks for it again instead of relaying a refusal the client did not earn.
      this.#moved = true;
      controller.abort(new Error('the owner node no longer holds the session'));
      return;
    }
    this.#res.writeHead(statusCode, statusMessage ?? '', withoutHopByHop(raw));
  }

  onResponseData(controller: DispatchController, chunk: Buffer): void {
    this.#counters.bytesIn += chunk.length;
    if (!this.#res.write(chunk)) controller.pause();
  }

  onResponseEnd(controller: DispatchController): void {
    const trailers = rawStrings(controller.rawTrailers as Buffer[] | string[] | null | undefined);
    if (trailers.length > 0 && this.#res.chunkedEncoding) this.#res.addTrailers(pairs(trailers));
    this.#res.end();
    this.#finish('ok');
  }

  onResponseError(_controller: DispatchController, err: Error): void {
    if (this.#moved) {
      this.#finish('moved', err);
      return;
    }
    if (!this.#req.complete) this.#req.resume();
    if (this.#res.headersSent || this.#res.destroyed) {
      this.#res.destroy();
      this.#finish('aborted', err);
    } else {
      this.#finish('unreachable', err);
    }
  }
}

/** undici, loaded on the first forwarded request: an edge that never forwards (one node) never loads it. */
let undici: Promise<typeof import('undici')> | undefined;

export interface NodeHopOptions {
  /** A peer that does not accept a connection in this time is unreachable (never a hang). */
  connectTimeoutMs: number;
  /** A forwarded request without a response head in this time fails (the peer answers 504 before). */
  headersTimeoutMs: number;
  /** Pooled keep-alive connections per peer node. */
  connectionsPerNode: number;
}

/**
 * How a forwarded exchange ended, for the caller's metrics and cache. `moved`: the owner answered "not
 * here" to a request without a body that cannot have run there (or may run twice), and nothing was
 * written to the client (only when the caller asked for `reroutable`).
 */
export type HopOutcome = 'ok' | 'unreachable' | 'aborted' | 'moved';

/** The owner's answer says the session is not there (any more). */
export function isNotHere(code: string | undefined): boolean {
  return code === EdgeErrorCode.UNKNOWN_SESSION || code === EdgeErrorCode.TUNNEL_OFFLINE;
}

export interface HopCounters {
  /** Body bytes sent to peer nodes (request bodies, upgraded client bytes). */
  bytesOut: number;
  /** Body bytes received from peer nodes. */
  bytesIn: number;
}

/**
 * The request body as undici pulls it, counted on the way. A generator, not a 'data' listener: a listener
 * would start the body flowing before undici reads it and lose what came first. undici awaits each write,
 * so the client is read no faster than the peer accepts.
 */
async function* counted(source: AsyncIterable<Buffer>, counters: HopCounters): AsyncGenerator<Buffer> {
  for await (const chunk of source) {
    counters.bytesOut += chunk.length;
    yield chunk;
  }
}

/**
 * The node-to-node hop: a pooled HTTP/1.1 connection set per peer node (undici), to the peer's public
 * port, driven through `dispatch()` so the answer keeps what the owner sent: raw field order and case,
 * interim heads, trailers. The request body is undici's body stream source; the answer is written as it
 * comes, undici paused while the client's response is full: nothing is buffered whole.
 * A WebSocket upgrade is relayed as a raw socket pipe: the peer sees an ordinary upgrade and handles it
 * exactly like a local one.
 */
export class NodeHop {
  readonly #pools = new Map<string, Pool>();
  readonly #options: NodeHopOptions;
  readonly counters: HopCounters = { bytesOut: 0, bytesIn: 0 };
  /** After close, no new pool or socket: either would hold a stopped node's process open. */
  #closed = false;
  /** Relayed upgrades' sockets to their peers: close() cuts them, as the server cuts its own connections. */
  readonly #upgrades = new Set<Socket>();

  constructor(options: NodeHopOptions) {
    this.#options = options;
  }

  /** The peer's pool; the first one waits for undici to load (a single node never loads it). */
  #pool(url: string): Pool | Promise<Pool> {
    const pool = this.#pools.get(url);
    if (pool !== undefined) return pool;
    undici ??= import('undici');
    return undici.then(({ Pool }) => {
      if (this.#closed) throw new Error('this node is stopping');
      let created = this.#pools.get(url);
      if (created === undefined) {
        created = new Pool(url, {
          connections: this.#options.connectionsPerNode,
          connect: { timeout: this.#options.connectTimeoutMs },
          headersTimeout: this.#options.headersTimeoutMs,
          // A quiet SSE stream or a slow download is not a failure of the hop.
          bodyTimeout: 0,
          pipelining: 1,
        });
        this.#pools.set(url, created);
      }
      return created;
    });
  }

  /** Drops the pool of a node that failed, so its sockets and queue go with it. */
  forget(url: string): void {
    const pool = this.#pools.get(url);
    if (pool === undefined) return;
    this.#pools.delete(url);
    void pool.destroy().catch(() => {});
  }

  /**
   * Carries `req` to `owner` with `headers` (already cleaned and signed) and relays the answer into `res`
   * as the owner sent it: raw field order and case, interim heads (103, 102), trailers. A request with
   * `Expect: 100-continue` goes through node:http (undici refuses Expect) so the owner's backend decides on
   * the body. `done` is called once: `unreachable` only when no final head was written to `res` yet, so the
   * caller can still answer with its own error.
   */
  forward(
    owner: OwnerEntry,
    req: IncomingMessage,
    res: ServerResponse,
    headers: string[],
    hasBody: boolean,
    done: (outcome: HopOutcome, detail: { err?: unknown; edgeError?: string }) => void,
    reroutable = false,
  ): void {
    if (this.#closed) {
      done('unreachable', { err: new Error('this node is stopping') });
      return;
    }
    if (hasBody && req.headers.expect?.toLowerCase() === '100-continue') {
      this.#forwardExpecting(owner, req, res, headers, done);
      return;
    }
    // Only a request without a body can be sent again: nothing of it is consumed by a failed hop.
    const relay = new HopRelay(req, res, this.counters, done, reroutable && !hasBody);
    const request: Dispatcher.DispatchOptions = {
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      headers,
      body: hasBody ? Readable.from(counted(req, this.counters), { objectMode: false }) : null,
    };
    const pool = this.#pool(owner.url);
    if (pool instanceof Promise) {
      pool.then(
        (ready) => ready.dispatch(request, relay),
        (err: unknown) => done('unreachable', { err }),
      );
    } else {
      pool.dispatch(request, relay);
    }
  }

  /** The Expect path: one node:http request whose body starts only on the owner's `100 Continue`. */
  #forwardExpecting(
    owner: OwnerEntry,
    req: IncomingMessage,
    res: ServerResponse,
    headers: string[],
    done: (outcome: HopOutcome, detail: { err?: unknown; edgeError?: string }) => void,
  ): void {
    const counters = this.counters;
    const peer = peerAddress(owner.url);
    let settled = false;
    const finish = (outcome: HopOutcome, detail: { err?: unknown; edgeError?: string }): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      res.off('close', onClientGone);
      done(outcome, detail);
    };
    const outgoing = (peer.secure ? process.getBuiltinModule('node:https').request : httpRequest)({
      protocol: peer.protocol,
      hostname: peer.host,
      port: peer.port,
      method: req.method ?? 'POST',
      path: req.url ?? '/',
      headers: [...headers, 'Expect', '100-continue'],
      // One request per connection: a body the owner refused (an early final answer) leaves it unusable.
      agent: false,
    });
    // Until the final head: the peer's connect and head must come in the hop's headers timeout.
    const headTimeout = (): NodeJS.Timeout =>
      setTimeout(
        () => outgoing.destroy(new NodeHopTimeout('no response head from the peer node in time')),
        this.#options.headersTimeoutMs,
      );
    let timer = headTimeout();
    const onClientGone = (): void => {
      if (!res.writableFinished) outgoing.destroy();
    };
    res.once('close', onClientGone);
    let bodyStarted = false;
    outgoing.on('information', (info) => {
      if (info.statusCode === 100 && !bodyStarted) {
        bodyStarted = true;
        // A slow upload is the client's pace, not a silent peer: the head timer waits for the body's end.
        clearTimeout(timer);
        req.once('end', () => {
          if (!settled && !outgoing.destroyed) timer = headTimeout();
        });
        req.on('data', (chunk: Buffer) => (counters.bytesOut += chunk.length));
        req.pipe(outgoing);
      }
      writeInformational(req, res, info.statusCode, info.statusMessage, info.rawHeaders);
    });
    outgoing.on('error', (err) => {
      if (!req.complete && !bodyStarted) req.resume();
      if (res.headersSent || res.destroyed) {
        res.destroy();
        finish('aborted', { err });
      } else {
        finish('unreachable', { err });
      }
    });
    outgoing.on('response', (answer) => {
      clearTimeout(timer);
      if (!bodyStarted) {
        // An early final answer: the body is never sent; the client's is drained by the server.
        outgoing.end();
      }
      const raw = answer.rawHeaders;
      const edgeError = answer.headers['x-tunnel2-error'];
      const detail = typeof edgeError === 'string' ? { edgeError } : {};
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, withoutHopByHop(raw));
      answer.on('data', (chunk: Buffer) => (counters.bytesIn += chunk.length));
      answer.pipe(res, { end: false });
      answer.once('end', () => {
        const trailers = answer.rawTrailers;
        if (trailers.length > 0 && res.chunkedEncoding) res.addTrailers(pairs(trailers));
        res.end();
        finish('ok', detail);
        if (!bodyStarted) outgoing.destroy();
      });
      answer.once('aborted', () => {
        res.destroy();
        finish('aborted', detail);
      });
      answer.once('error', (err) => {
        res.destroy();
        finish('aborted', { err, ...detail });
      });
    });
  }

  /**
   * Relays an upgrade to `owner` as raw bytes: the request head (`headers` cleaned and signed), the bytes
   * already read, then both directions piped. Exactly one of the three is called once: `failed` (before
   * any byte reached the client) when the peer cannot be reached in the connect timeout, `abandoned` when
   * the client left before the peer was connected (the peer is not at fault), `finished` when the pipe
   * ends.
   */
  forwardUpgrade(
    owner: OwnerEntry,
    req: IncomingMessage,
    client: Duplex,
    head: Buffer,
    headers: string[],
    ends: { failed: (err: unknown) => void; abandoned: () => void; finished: () => void },
  ): void {
    if (this.#closed) {
      ends.failed(new Error('this node is stopping'));
      return;
    }
    const { secure, host, port } = peerAddress(owner.url);
    const upstream: Socket = secure
      ? process
          .getBuiltinModule('node:tls')
          .connect({ host, port, ...(isIP(host) === 0 ? { servername: host } : {}) })
      : netConnect({ host, port });
    this.#upgrades.add(upstream);
    upstream.once('close', () => this.#upgrades.delete(upstream));
    const counters = this.counters;
    let connected = false;
    let gaveUp = false;
    const timer = setTimeout(
      () => upstream.destroy(new Error('connect timeout')),
      this.#options.connectTimeoutMs,
    );
    const onClientGone = (): void => {
      if (connected || gaveUp) return;
      gaveUp = true;
      clearTimeout(timer);
      // destroy() without an error emits only 'close': the caller hears of it here, not from 'error'.
      upstream.destroy();
      ends.abandoned();
    };
    // The server keeps an upgraded socket half open: a client that leaves shows as 'end' first.
    const onClientEnd = (): void => {
      if (!connected) client.destroy();
    };
    client.once('close', onClientGone);
    client.once('end', onClientEnd);
    upstream.once('error', (err) => {
      clearTimeout(timer);
      if (!connected && !gaveUp) {
        gaveUp = true;
        client.off('close', onClientGone);
        client.off('end', onClientEnd);
        ends.failed(err);
      }
    });
    upstream.once(secure ? 'secureConnect' : 'connect', () => {
      clearTimeout(timer);
      if (gaveUp) return;
      connected = true;
      client.off('close', onClientGone);
      client.off('end', onClientEnd);
      let lines = `${req.method ?? 'GET'} ${req.url ?? '/'} HTTP/1.1\r\n`;
      for (let i = 0; i < headers.length; i += 2) lines += `${headers[i]}: ${headers[i + 1]}\r\n`;
      lines += 'Connection: Upgrade\r\n';
      lines += `Upgrade: ${String(req.headers.upgrade)}\r\n\r\n`;
      upstream.write(lines);
      if (head.length > 0) upstream.write(head);
      client.on('data', (chunk: Buffer) => (counters.bytesOut += chunk.length));
      upstream.on('data', (chunk: Buffer) => (counters.bytesIn += chunk.length));
      let open = 2;
      const end = (): void => {
        if (--open === 0) ends.finished();
      };
      pipeline(client, upstream, () => {
        client.destroy();
        upstream.destroy();
        end();
      });
      pipeline(upstream, client, () => {
        client.destroy();
        upstream.destroy();
        end();
      });
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const upstream of this.#upgrades) upstream.destroy();
    this.#upgrades.clear();
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await Promise.all(pools.map((pool) => pool.destroy().catch(() => {})));
  }
}
