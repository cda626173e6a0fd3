import { connect } from 'node:net';
import { BenchError, BenchErrorCode } from '../errors.js';
import type { LoadTarget } from '../stacks/bench-stack.js';

/*
 * The HTTP/1.1 client of `pnpm bench bulk`: one request per connection, written and read on a raw socket.
 *
 * Why not node:http: its client spent 0.8–0.93 s of CPU per GiB downloaded on this project's 2-core bench
 * machine (every 64 KiB read goes through its parser and becomes a new Buffer and a 'data' event), against
 * 0.17 s for this one, which reads into one reused buffer (net's `onread`) and only counts. On 2 cores shared
 * with the edge, the agent and the backend, the instrument's own CPU was taken from the processes it measures.
 */

const READ_BUFFER_BYTES = 256 * 1024;
const MAX_HEAD_BYTES = 64 * 1024;
/** An upload's answer is a small JSON document; anything larger is not the test backend's. */
const MAX_TEXT_BODY_BYTES = 64 * 1024;

export interface BulkResponse {
  status: number;
  /** Body bytes received; equal to the response's Content-Length (anything else rejects). */
  bodyBytes: number;
  /** The body as text, only when asked for (small answers). */
  text: string;
  /** performance.now() when the answer's first byte arrived: a time to first byte, from the caller's start. */
  firstByteAt: number;
  /** True when the caller's signal stopped the answer early: bodyBytes is then what arrived until then. */
  cut: boolean;
}

/** What a streaming caller may add to a transfer. */
export interface TransferOptions {
  /** Sees every body byte in order (to hash it); the chunk is a view of a reused buffer, valid only in the call. */
  onBody?: (chunk: Buffer) => void;
  /** Stops the answer where it is (a time limit, or a load that is no longer needed): resolved, marked `cut`. */
  signal?: AbortSignal;
}

interface ExchangeOptions {
  target: LoadTarget;
  head: string;
  /** Writes the request body after the head, honouring the socket's backpressure. */
  sendBody?: (write: (chunk: Buffer) => Promise<void>) => Promise<void>;
  keepText: boolean;
  transfer?: TransferOptions;
}

function transferError(message: string, cause?: unknown): BenchError {
  return new BenchError(BenchErrorCode.TRANSFER, message, cause === undefined ? undefined : { cause });
}

function parseHead(head: string): { status: number; contentLength: number } {
  const lines = head.split('\r\n');
  const statusMatch = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '');
  if (statusMatch === null) throw transferError(`not an HTTP/1.1 status line: ${JSON.stringify(lines[0])}`);
  let contentLength: number | undefined;
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === 'content-length') contentLength = Number(value);
    if (name === 'transfer-encoding') {
      throw transferError(
        `the answer is framed with Transfer-Encoding: ${value}; bulk expects a Content-Length`,
      );
    }
  }
  if (contentLength === undefined || !Number.isSafeInteger(contentLength) || contentLength < 0) {
    throw transferError('the answer has no valid Content-Length');
  }
  return { status: Number(statusMatch[1]), contentLength };
}

function exchange(options: ExchangeOptions): Promise<BulkResponse> {
  const url = new URL(options.target.origin);
  const readBuffer = Buffer.allocUnsafe(READ_BUFFER_BYTES);
  return new Promise((resolve, reject) => {
    let head = '';
    let parsed: { status: number; contentLength: number } | undefined;
    let bodyBytes = 0;
    let text = '';
    let settled = false;
    let firstByteAt = Number.NaN;
    const { onBody, signal } = options.transfer ?? {};
    const settle = (error: BenchError | null, cut = false): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      signal?.removeEventListener('abort', onAbort);
      if (error !== null) reject(error);
      else if (parsed !== undefined) resolve({ status: parsed.status, bodyBytes, text, firstByteAt, cut });
      else reject(transferError('stopped before the answer arrived'));
    };
    const onAbort = (): void => settle(null, true);
    const takeBody = (chunk: Buffer): void => {
      if (parsed === undefined) return;
      bodyBytes += chunk.length;
      onBody?.(chunk);
      if (options.keepText) {
        if (bodyBytes > MAX_TEXT_BODY_BYTES) {
          settle(transferError(`the answer's body is over ${MAX_TEXT_BODY_BYTES} bytes`));
          return;
        }
        text += chunk.toString('utf8');
      }
      if (bodyBytes > parsed.contentLength) {
        settle(
          transferError(
            `${bodyBytes} body bytes arrived, more than the Content-Length ${parsed.contentLength}`,
          ),
        );
      } else if (bodyBytes === parsed.contentLength) settle(null);
    };
    const socket = connect({
      host: url.hostname,
      port: Number(url.port),
      onread: {
        buffer: readBuffer,
        callback: (length: number, buffer: Uint8Array): boolean => {
          if (Number.isNaN(firstByteAt)) firstByteAt = performance.now();
          const chunk = Buffer.from(buffer.buffer, buffer.byteOffset, length);
          if (parsed !== undefined) {
            takeBody(chunk);
            return true;
          }
          head += chunk.toString('latin1');
          const end = head.indexOf('\r\n\r\n');
          if (end < 0) {
            if (head.length > MAX_HEAD_BYTES)
              settle(transferError(`no end of the answer's head in ${head.length} bytes`));
            return true;
          }
          try {
            parsed = parseHead(head.slice(0, end));
          } catch (err) {
            settle(err instanceof BenchError ? err : transferError(String(err)));
            return true;
          }
          // The head arrived as latin1, one character per byte: what follows it is body.
          const bodyStart = length - (head.length - end - 4);
          head = '';
          if (parsed.contentLength === 0) settle(null);
          else takeBody(chunk.subarray(bodyStart));
          return true;
        },
      },
    });
    socket.setNoDelay(true);
    // Already aborted: settled at once, and no listener left on a signal that will not fire again.
    if (signal?.aborted === true) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    socket.on('error', (err) => settle(transferError(`connection failed: ${err.message}`, err)));
    socket.on('close', () => {
      const received =
        parsed === undefined
          ? 'before the answer'
          : `after ${bodyBytes} of ${parsed.contentLength} body bytes`;
      settle(transferError(`the connection closed ${received}`));
    });
    const write = (chunk: Buffer): Promise<void> =>
      socket.write(chunk)
        ? Promise.resolve()
        : new Promise((drained, failed) => {
            const onClose = (): void =>
              failed(transferError('the connection closed while the body was being sent'));
            socket.once('close', onClose);
            socket.once('drain', () => {
              socket.off('close', onClose);
              drained();
            });
          });
    socket.write(options.head);
    options
      .sendBody?.(write)
      .catch((err: unknown) => settle(err instanceof BenchError ? err : transferError(String(err))));
  });
}

function requestHead(method: string, path: string, host: string, extra: string): string {
  return `${method} ${path} HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n${extra}\r\n`;
}

/** `GET <path>`, read to its end or until `transfer.signal` stops it; anything but a 200 rejects. */
export async function download(
  target: LoadTarget,
  path: string,
  transfer?: TransferOptions,
): Promise<BulkResponse> {
  const response = await exchange({
    target,
    head: requestHead('GET', path, target.host, ''),
    keepText: false,
    ...(transfer === undefined ? {} : { transfer }),
  });
  if (response.status !== 200) throw transferError(`the download answered ${response.status}`);
  return response;
}

/** `GET /bytes/<bytes>`: resolves with the body bytes received once all of them are in. */
export async function bulkDownload(target: LoadTarget, bytes: number): Promise<number> {
  return (await download(target, `/bytes/${bytes}`)).bodyBytes;
}

const CRLF = Buffer.from('\r\n');
const CHUNKED_END = Buffer.from('0\r\n\r\n');

/**
 * `POST <path>` with a chunked body taken from `chunks`. When `stop` aborts, the body ends properly where it
 * is (a time limit), so the backend still answers for what it received. Resolves with the bytes sent and the
 * answer's text; anything but a 200 rejects.
 */
export async function chunkedUpload(
  target: LoadTarget,
  path: string,
  chunks: Iterable<Buffer>,
  stop?: AbortSignal,
): Promise<{ sent: number; text: string }> {
  let sent = 0;
  const response = await exchange({
    target,
    head: requestHead(
      'POST',
      path,
      target.host,
      'transfer-encoding: chunked\r\ncontent-type: application/octet-stream\r\n',
    ),
    sendBody: async (write) => {
      // Stop is checked before the next chunk is taken: a chunk taken is a chunk sent (the caller may hash it).
      const iterator = chunks[Symbol.iterator]();
      while (stop?.aborted !== true) {
        const next = iterator.next();
        if (next.done === true) break;
        const chunk = next.value;
        // One write per chunk with its framing: a copy of 64 KiB costs less than three small segments.
        await write(Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, CRLF]));
        sent += chunk.length;
      }
      await write(CHUNKED_END);
    },
    keepText: true,
  });
  if (response.status !== 200) {
    throw transferError(`the upload answered ${response.status}: ${response.text.slice(0, 200)}`);
  }
  return { sent, text: response.text };
}

/**
 * `POST /discard` with `bytes` bytes of `chunk` repeated: resolves with the byte count the backend says it
 * received.
 */
export async function bulkUpload(target: LoadTarget, bytes: number, chunk: Buffer): Promise<number> {
  const response = await exchange({
    target,
    head: requestHead(
      'POST',
      '/discard',
      target.host,
      `content-length: ${bytes}\r\ncontent-type: application/octet-stream\r\n`,
    ),
    sendBody: async (write) => {
      for (let left = bytes; left > 0; left -= chunk.length) {
        await write(left >= chunk.length ? chunk : chunk.subarray(0, left));
      }
    },
    keepText: true,
  });
  const counted = parseCount(response.text);
  if (response.status !== 200 || counted === undefined) {
    throw transferError(`the upload answered ${response.status}: ${response.text.slice(0, 200)}`);
  }
  return counted;
}

function parseCount(text: string): number | undefined {
  try {
    const counted = (JSON.parse(text) as { bytes?: unknown }).bytes;
    return typeof counted === 'number' ? counted : undefined;
  } catch {
    return undefined;
  }
}
