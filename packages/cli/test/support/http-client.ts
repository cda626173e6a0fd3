import { createHash } from 'node:crypto';
import { type Agent, type IncomingMessage, request } from 'node:http';
import type { Readable } from 'node:stream';

export interface ClientRequest {
  port: number;
  path: string;
  method?: string;
  /** Flat raw header list, sent in this order and case. */
  headers?: string[];
  body?: Buffer | Readable;
  /** Keep the body (default); false only hashes it. */
  keepBody?: boolean;
  /** No agent (a connection per request, the default), or one that keeps connections alive. */
  agent?: false | Agent;
  /** Gives up (rejects, destroying the request) when the whole answer has not come within this time. */
  timeoutMs?: number;
}

export interface ClientResponse {
  status: number;
  rawHeaders: string[];
  headers: IncomingMessage['headers'];
  body: Buffer;
  sha256: string;
  length: number;
  trailers: IncomingMessage['trailers'];
}

/** A plain node:http client: full control of the Host header and of raw header order. */
export function send(options: ClientRequest): Promise<ClientResponse> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port: options.port,
      path: options.path,
      method: options.method ?? 'GET',
      headers: options.headers,
      agent: options.agent ?? false,
      setHost: !(options.headers ?? []).some((h, i) => i % 2 === 0 && h.toLowerCase() === 'host'),
    });
    req.on('error', reject);
    if (options.timeoutMs !== undefined) {
      const timer = setTimeout(
        () => req.destroy(new Error(`no complete answer within ${options.timeoutMs} ms`)),
        options.timeoutMs,
      );
      req.on('close', () => clearTimeout(timer));
    }
    req.on('response', (res) => {
      const hash = createHash('sha256');
      const chunks: Buffer[] = [];
      let length = 0;
      res.on('data', (chunk: Buffer) => {
        hash.update(chunk);
        length += chunk.length;
        if (options.keepBody !== false) chunks.push(chunk);
      });
      res.on('error', reject);
      res.on('aborted', () => reject(new Error('response aborted')));
      res.on('end', () => {
        if (!res.complete) {
          reject(new Error('response ended before it was complete'));
          return;
        }
        resolve({
          status: res.statusCode ?? 0,
          rawHeaders: res.rawHeaders,
          headers: res.headers,
          body: Buffer.concat(chunks),
          sha256: hash.digest('hex'),
          length,
          trailers: res.trailers,
        });
      });
    });
    const body = options.body;
    if (body === undefined) req.end();
    else if (Buffer.isBuffer(body)) req.end(body);
    else body.pipe(req);
  });
}

export function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Values of a header (any case) from a raw header list, in order. */
export function headerValues(raw: string[], name: string): string[] {
  const lower = name.toLowerCase();
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === lower) out.push(raw[i + 1]!);
  return out;
}
