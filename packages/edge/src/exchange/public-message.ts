import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';

// What the shared path (routing, admission, the exchange, the edge's answers) reads of a public request and
// writes to its response, whichever ingress parsed it. Node's HTTP/1.1 IncomingMessage and ServerResponse
// satisfy these as they are, so the HTTP/1.1 path passes its own objects and allocates nothing more; the
// HTTP/2 ingress's request and response (../listeners/http2-messages.ts) satisfy them too.

/** A public request: its head as the tunnel forwards it, and its body as a readable stream. */
export interface PublicMessage extends Readable {
  readonly headers: IncomingHttpHeaders;
  /**
   * The header fields as received (name, value, …). On HTTP/2: the regular fields only, with `host` first
   * from `:authority` when the client sent no `host`, as the tunnel's request head carries them.
   */
  readonly rawHeaders: string[];
  /** Trailer fields (name, value, …) once the body has ended. */
  readonly rawTrailers: string[];
  readonly method?: string | undefined;
  readonly url?: string | undefined;
  readonly httpVersionMajor: number;
  readonly httpVersionMinor: number;
  readonly socket: Socket;
  /**
   * HTTP/2 only: whether DATA follows the head (HTTP/2 needs no length or coding to carry a body).
   * Undefined on HTTP/1.x, where the head says it (raw-http.ts `requestHasBody`).
   */
  readonly bodyFollows?: boolean | undefined;
}

/** A public response, as the exchange and the edge's answers write it. */
export interface PublicResponse extends NodeJS.EventEmitter {
  readonly req: PublicMessage;
  readonly headersSent: boolean;
  readonly destroyed: boolean;
  readonly writableFinished: boolean;
  /** end() was called (what was written may still be leaving). */
  readonly writableEnded: boolean;
  readonly socket: Socket | null;
  /** Only HTTP/1.x sends a reason phrase; HTTP/2 has none. */
  statusMessage: string;
  /** HTTP/1.x: false closes the connection after this response. HTTP/2 ends the stream alone. */
  shouldKeepAlive: boolean;
  /** Trailers can follow the body (a chunked HTTP/1.1 response; always on HTTP/2). */
  readonly chunkedEncoding: boolean;
  writeHead(status: number, statusMessage?: string, headers?: string[]): unknown;
  writeHead(status: number, headers?: string[]): unknown;
  setHeader(name: string, value: string | number | readonly string[]): unknown;
  getHeader(name: string): string | number | string[] | undefined;
  removeHeader(name: string): void;
  write(chunk: Buffer): boolean;
  end(): unknown;
  end(chunk: Buffer | string): unknown;
  addTrailers(trailers: [string, string][]): void;
  flushHeaders(): void;
  writeContinue(): void;
  writeEarlyHints(hints: Record<string, string | string[]>): void;
  destroy(): void;
  /**
   * HTTP/2 only: ends the response as aborted (RST_STREAM `code`, after what was written). Absent on
   * HTTP/1.x, where an abort is the connection's (response-abort.ts).
   */
  readonly abortStream?: ((code?: number) => void) | undefined;
  /** HTTP/2 only: writes a head that ends the stream (HEADERS with END_STREAM), for an answer without body. */
  readonly endWithHead?: ((status: number, fields: string[]) => void) | undefined;
  /** HTTP/2 only: sends an interim (1xx) head other than 100 and 103 (HEADERS without END_STREAM). */
  readonly sendInterim?: ((status: number, fields: string[]) => void) | undefined;
}
