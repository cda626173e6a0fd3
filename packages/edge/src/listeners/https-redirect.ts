import { constants } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { EDGE_ANSWER_HEADERS } from '../answers/error-response.js';

// Not an `import`: an ESM import of node:http also loads Node's bundled undici (README.md, "Development").
const { createServer } = process.getBuiltinModule('node:http');

export interface HttpsRedirectOptions {
  /** The port clients reach the TLS port on: in the Location unless 443. */
  httpsPort: () => number;
  /** The host used when a request names none (HTTP/1.0). */
  domain: string;
  /** Where ACME HTTP-01 answers are (`acmeDir`); undefined: every path is redirected. */
  acmeDir: string | undefined;
  headersTimeoutMs: number;
  maxHeaderBytes: number;
  logger: Logger;
}

const ACME_PREFIX = '/.well-known/acme-challenge/';
/** An ACME key authorization is a token, a dot and a thumbprint: under 200 bytes. */
const MAX_ACME_FILE_BYTES = 64 * 1024;
/** RFC 8555 §8.3: a token is base64url characters only, so no `/`, `.` or `%` can lead out of the folder. */
const ACME_TOKEN = /^[A-Za-z0-9_-]{1,256}$/;
/** A host name or an IPv4 address with an optional port, or a bracketed IPv6 one: nothing else goes into Location. */
const HOST = /^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

function answer(
  res: ServerResponse,
  status: number,
  text: string,
  headers: Record<string, string> = {},
): void {
  const body = `${text}\n`;
  res.writeHead(status, {
    ...EDGE_ANSWER_HEADERS,
    'content-type': 'text/plain; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
    ...headers,
  });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

/**
 * The challenge file: where an ACME client's webroot mode writes it (certbot --webroot -w, lego
 * --http.webroot, acme.sh -w: `<dir>/.well-known/acme-challenge/<token>`), else `<dir>/<token>` (a folder
 * given as the challenge folder itself, as dehydrated's WELLKNOWN). Undefined when neither opens.
 */
async function openChallenge(dir: string, token: string): Promise<FileHandle | undefined> {
  for (const path of [join(dir, ACME_PREFIX, token), join(dir, token)]) {
    try {
      return await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
    } catch {
      // Not there: the other place, then 404.
    }
  }
  return undefined;
}

/**
 * Serves one ACME HTTP-01 answer from the folder: a regular file, bounded, read whole (it is under 200 bytes;
 * the bound is 64 KiB) and closed before the answer goes out; else 404. Opened non-blocking: a FIFO in the
 * folder would otherwise hold a thread of libuv's pool until something writes to it.
 */
async function serveAcme(res: ServerResponse, dir: string, token: string): Promise<void> {
  if (!ACME_TOKEN.test(token)) {
    answer(res, 404, 'not found: not an ACME token');
    return;
  }
  const handle = await openChallenge(dir, token);
  if (handle === undefined) {
    answer(res, 404, 'not found: no such ACME challenge');
    return;
  }
  let body: Buffer | undefined;
  try {
    const stats = await handle.stat();
    if (stats.isFile() && stats.size <= MAX_ACME_FILE_BYTES) {
      // Through the descriptor checked above, no further than its size then.
      const buffer = Buffer.alloc(stats.size);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      body = buffer.subarray(0, bytesRead);
    }
  } finally {
    await handle.close();
  }
  if (body === undefined) {
    answer(res, 404, 'not found: no such ACME challenge');
    return;
  }
  res.writeHead(200, {
    ...EDGE_ANSWER_HEADERS,
    'content-type': 'application/octet-stream',
    'content-length': String(body.length),
  });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

/**
 * The optional plain port beside a TLS one (`httpPort`): every request gets 308 to the same path over
 * https (308 keeps the method and body, unlike 301), except ACME HTTP-01 challenges, answered from `acmeDir`
 * so a certificate can be issued or renewed without stopping the edge. Bounded like the public port: a head
 * within headersTimeout, at most maxHeaderBytes, no body read.
 */
export function createHttpsRedirect(options: HttpsRedirectOptions): Server {
  /** The same URL over https, on the TLS port; undefined for a Host that cannot go into a Location. */
  const locationOf = (req: IncomingMessage): string | undefined => {
    const host = req.headers.host ?? options.domain;
    const target = req.url ?? '/';
    if (!HOST.test(host) || !target.startsWith('/')) return undefined;
    const hostname = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0]!;
    const port = options.httpsPort();
    return `https://${hostname}${port === 443 ? '' : `:${port}`}${target}`;
  };
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    // Nothing of a body is wanted: the connection closes after the answer rather than read it.
    res.shouldKeepAlive =
      req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined;
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (
      options.acmeDir !== undefined &&
      path.startsWith(ACME_PREFIX) &&
      (req.method === 'GET' || req.method === 'HEAD')
    ) {
      serveAcme(res, options.acmeDir, path.slice(ACME_PREFIX.length)).catch((err: unknown) => {
        options.logger.warn({ err }, 'ACME challenge not served');
        if (!res.headersSent) answer(res, 500, 'the ACME challenge could not be read');
        else res.destroy();
      });
      return;
    }
    const location = locationOf(req);
    if (location === undefined) {
      answer(res, 400, 'bad request: no valid Host to redirect to');
      return;
    }
    answer(res, 308, `this edge is served over HTTPS: ${location}`, { location });
  };
  const server = createServer(
    {
      headersTimeout: options.headersTimeoutMs,
      requestTimeout: options.headersTimeoutMs,
      connectionsCheckingInterval: Math.min(1_000, Math.ceil(options.headersTimeoutMs / 4)),
      maxHeaderSize: options.maxHeaderBytes,
    },
    onRequest,
  );
  // A WebSocket (an agent given http://) is sent to the TLS port too, then the connection closes.
  server.on('upgrade', (req: IncomingMessage, socket: Duplex) => {
    const location = locationOf(req);
    socket.end(
      location === undefined
        ? 'HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n'
        : `HTTP/1.1 308 Permanent Redirect\r\nlocation: ${location}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`,
    );
  });
  return server;
}
