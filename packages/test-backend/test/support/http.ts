import { createHash } from 'node:crypto';
import { type Agent, type IncomingHttpHeaders, request } from 'node:http';

export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: Buffer;
}

export interface SendOptions {
  method?: string;
  /** Header lines as [name, value, name, value, ...]: order, case and repeats are kept. */
  headers?: string[];
  body?: string | Buffer;
  agent?: Agent | false;
}

/** One request over a real socket (node:http, so repeated and raw headers are visible). */
export function send(base: string, path: string, options: SendOptions = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const url = new URL(path, base);
    const headers = [...(options.headers ?? [])];
    // Raw header arrays are sent exactly as given: node adds neither Host nor framing, so they go here.
    if (headerValues(headers, 'host').length === 0) headers.unshift('Host', url.host);
    const framed =
      headerValues(headers, 'content-length').length + headerValues(headers, 'transfer-encoding').length;
    if (options.body !== undefined && framed === 0) {
      headers.push('Content-Length', String(Buffer.byteLength(options.body)));
    }
    const req = request(url, {
      method: options.method ?? 'GET',
      headers,
      agent: options.agent ?? false,
    });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          rawHeaders: res.rawHeaders,
          body: Buffer.concat(chunks),
        }),
      );
    });
    req.end(options.body);
  });
}

export function json<T>(reply: Reply): T {
  return JSON.parse(reply.body.toString()) as T;
}

export function sha256(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** The values of header `name` (any case) in a raw header list, in order. */
export function headerValues(rawHeaders: readonly string[], name: string): string[] {
  const values: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() === name.toLowerCase()) values.push(rawHeaders[i + 1]!);
  }
  return values;
}
