import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect as netConnect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { pipeline, Readable } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import { withoutHopByHop } from '@tunnel2/protocol';
import { Pool } from 'undici';
import type { OwnerEntry } from './owner-cache.js';

export interface NodeHopOptions {
  /** A peer that does not accept a connection in this time is unreachable (never a hang). */
  connectTimeoutMs: number;
  /** A forwarded request without a response head in this time fails (the peer answers 504 before). */
  headersTimeoutMs: number;
  /** Pooled keep-alive connections per peer node. */
  connectionsPerNode: number;
}

/** How a forwarded exchange ended, for the caller's metrics and cache. */
export type HopOutcome = 'ok' | 'unreachable' | 'aborted';

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
 * port. Bodies stream both ways through `pipeline` (the request body is undici's body stream source, the
 * answer is piped into the client's response): backpressure is the streams', nothing is buffered whole.
 * A WebSocket upgrade is relayed as a raw socket pipe: the peer sees an ordinary upgrade and handles it
 * exactly like a local one.
 */
export class NodeHop {
  readonly #pools = new Map<string, Pool>();
  readonly #options: NodeHopOptions;
  readonly counters: HopCounters = { bytesOut: 0, bytesIn: 0 };

  constructor(options: NodeHopOptions) {
    this.#options = options;
  }

  #pool(url: string): Pool {
    let pool = this.#pools.get(url);
    if (pool === undefined) {
      pool = new Pool(url, {
        connections: this.#options.connectionsPerNode,
        connect: { timeout: this.#options.connectTimeoutMs },
        headersTimeout: this.#options.headersTimeoutMs,
        // A quiet SSE stream or a slow download is not a failure of the hop.
        bodyTimeout: 0,
        pipelining: 1,
      });
      this.#pools.set(url, pool);
    }
    return pool;
  }

  /** Drops the pool of a node that failed, so its sockets and queue go with it. */
  forget(url: string): void {
    const pool = this.#pools.get(url);
    if (pool === undefined) return;
    this.#pools.delete(url);
    void pool.destroy().catch(() => {});
  }

  /**
   * Carries `req` to `owner` with `headers` (already cleaned and signed) and relays the answer into `res`.
   * `done` is called once: `unreachable` only when nothing was written to `res` yet, so the caller can
   * still answer with its own error.
   */
  forward(
    owner: OwnerEntry,
    req: IncomingMessage,
    res: ServerResponse,
    headers: string[],
    hasBody: boolean,
    done: (outcome: HopOutcome, detail: { err?: unknown; edgeError?: string }) => void,
  ): void {
    const counters = this.counters;
    const abort = new AbortController();
    const onClientGone = (): void => {
      if (!res.writableFinished) abort.abort();
    };
    res.once('close', onClientGone);
    this.#pool(owner.url)
      .request({
        method: req.method ?? 'GET',
        path: req.url ?? '/',
        headers,
        body: hasBody ? Readable.from(counted(req, counters), { objectMode: false }) : null,
        signal: abort.signal,
      })
      .then(
        (answer) => {
          if (res.destroyed) {
            answer.body.destroy();
            res.off('close', onClientGone);
            done('aborted', {});
            return;
          }
          const out: string[] = [];
          for (const [name, value] of Object.entries(answer.headers)) {
            if (value === undefined) continue;
            if (Array.isArray(value)) for (const v of value) out.push(name, v);
            else out.push(name, value);
          }
          const edgeError = answer.headers['x-tunnel2-error'];
          res.writeHead(answer.statusCode, withoutHopByHop(out));
          answer.body.on('data', (chunk: Buffer) => (counters.bytesIn += chunk.length));
          pipeline(answer.body, res, (err) => {
            res.off('close', onClientGone);
            done(err === undefined || err === null ? 'ok' : 'aborted', {
              err: err ?? undefined,
              ...(typeof edgeError === 'string' ? { edgeError } : {}),
            });
          });
        },
        (err: unknown) => {
          res.off('close', onClientGone);
          if (!req.complete) req.resume();
          done(abort.signal.aborted || res.destroyed ? 'aborted' : 'unreachable', { err });
        },
      );
  }

  /**
   * Relays an upgrade to `owner` as raw bytes: the request head (`headers` cleaned and signed), the bytes
   * already read, then both directions piped. `failed` is called (once, before any byte reached the
   * client) when the peer cannot be reached in the connect timeout.
   */
  forwardUpgrade(
    owner: OwnerEntry,
    req: IncomingMessage,
    client: Duplex,
    head: Buffer,
    headers: string[],
    failed: (err: unknown) => void,
    finished: () => void,
  ): void {
    const url = new URL(owner.url);
    const secure = url.protocol === 'https:';
    const port = Number(url.port || (secure ? 443 : 80));
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const upstream: Socket = secure
      ? tlsConnect({ host, port, servername: host })
      : netConnect({ host, port });
    const counters = this.counters;
    let connected = false;
    const timer = setTimeout(
      () => upstream.destroy(new Error('connect timeout')),
      this.#options.connectTimeoutMs,
    );
    const onClientGone = (): void => {
      if (!connected) upstream.destroy();
    };
    client.once('close', onClientGone);
    upstream.once('error', (err) => {
      clearTimeout(timer);
      if (!connected) {
        client.off('close', onClientGone);
        failed(err);
      }
    });
    upstream.once(secure ? 'secureConnect' : 'connect', () => {
      clearTimeout(timer);
      connected = true;
      client.off('close', onClientGone);
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
        if (--open === 0) finished();
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
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await Promise.all(pools.map((pool) => pool.destroy().catch(() => {})));
  }
}
