import type { ClientRequest, IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ExchangeRecorder } from '@tunnel2/inspector';
import {
  ErrorCode,
  encodeResponseHead,
  isFieldName,
  MAX_EARLY_UPGRADE_BYTES,
  MAX_INTERIM_HEADS,
  type MuxStream,
  type RequestHead,
  type StreamHandler,
  type StreamResetError,
  withoutHopByHop,
} from '@tunnel2/protocol';
import { backendErrorCode, describeBackendError, sendBackendErrorAnswer } from './backend-error.js';
import type { BackendErrorAnswer } from './backend-error-answer.js';
import type { ForwardOptions } from './forward-options.js';
import { HeldBytes } from './held-bytes.js';
import { httpsOptions } from './target-tls.js';

// Not an `import`: an ESM import of node:http also loads Node's bundled undici (README.md, "Development").
const { request: httpRequest } = process.getBuiltinModule('node:http');

/** True when a request head asks for a WebSocket upgrade. */
export function isWebSocketUpgrade(headers: string[]): boolean {
  return hasHeader(headers, 'upgrade', 'websocket');
}

/** True when a request waits for `100 Continue` before sending its body. */
export function expectsContinue(headers: string[]): boolean {
  return hasHeader(headers, 'expect', '100-continue');
}

// Every request is asked both (forward-exchange.ts): names compared in place, no lowercase copy of each.
function hasHeader(headers: string[], name: string, value: string): boolean {
  for (let i = 0; i < headers.length; i += 2) {
    if (isFieldName(headers[i]!, name) && headers[i + 1]!.trim().toLowerCase() === value) return true;
  }
  return false;
}

/**
 * The exchanges undici cannot carry, done with node:http instead: WebSocket upgrades (a 101 and then raw
 * bytes both ways, or a refusal with its body) and `Expect: 100-continue` requests (the backend's interim
 * 100 is relayed so the client sends its body only then, and an early final answer arrives without it).
 * Every direction is paused while the other side cannot take more.
 */
export class NodeHttpExchange implements StreamHandler {
  readonly #stream: MuxStream;
  readonly #options: ForwardOptions;
  readonly #started = performance.now();
  #head: RequestHead | undefined;
  #request: ClientRequest | undefined;
  #socket: Duplex | undefined;
  #response: IncomingMessage | undefined;
  #owed = 0;
  /**
   * A WebSocket client's bytes that came before the backend's 101 (a client that does not wait for it):
   * kept (copied: what they weigh, not the socket reads they came in), their credit not returned, and
   * written after the switch. At most MAX_EARLY_UPGRADE_BYTES: an edge sends no more before the answer.
   */
  readonly #held = new HeldBytes();
  /** The client's side ended before the switch: the backend socket is ended after the held bytes. */
  #heldEnd = false;
  #status = 0;
  #reported = false;
  #upgrade = false;
  /** A first byte of the backend's answer arrived (its own connection: agent false). */
  #answerBegun = false;
  /** Interim (1xx) heads passed on so far: past MAX_INTERIM_HEADS the backend is flooding. */
  #interim = 0;
  #recorder: ExchangeRecorder | undefined;

  constructor(stream: MuxStream, options: ForwardOptions) {
    this.#stream = stream;
    this.#options = options;
    stream.handler = this;
  }

  start(head: RequestHead, headers: string[], hasBody: boolean): void {
    this.#head = head;
    this.#upgrade = isWebSocketUpgrade(head.headers);
    this.#recorder = this.#options.capture?.begin({
      method: head.method,
      target: head.target,
      headers: head.headers,
      kind: this.#upgrade ? 'websocket' : 'http',
    });
    const origin = new URL(this.#options.target.origin);
    const tls = this.#options.target.tls;
    // node:https (and with it node:tls) is loaded for an https:// target only: an http:// agent never needs it.
    const request = (
      origin.protocol === 'https:' ? process.getBuiltinModule('node:https').request : httpRequest
    )({
      ...(tls === undefined ? {} : httpsOptions(tls, headers)),
      protocol: origin.protocol,
      hostname: origin.hostname.replace(/^\[|\]$/g, ''),
      port: origin.port,
      method: head.method,
      path: this.#options.target.basePath + head.target,
      headers: this.#upgrade
        ? [...headers, 'Connection', 'Upgrade', 'Upgrade', 'websocket']
        : [...headers, 'Expect', '100-continue'],
      setHost: false,
      agent: false,
    });
    this.#request = request;
    request.on('upgrade', (res, socket, rest) => this.#onUpgrade(res, socket, rest));
    request.on('information', (info) =>
      this.#onInterim(info.statusCode, info.statusMessage, info.rawHeaders),
    );
    request.on('response', (res) => this.#onResponse(res));
    request.on('error', (err) => this.#onError(err));
    request.once('socket', (socket) =>
      socket.once('data', () => {
        this.#answerBegun = true;
      }),
    );
    request.on('drain', () => this.#creditRequestBody());
    if (this.#upgrade || !hasBody) request.end();
  }

  onHeaders(): void {}

  onData(chunk: Buffer): void {
    if (!this.#upgrade) {
      this.#recorder?.requestData(chunk);
      // Request body on its way to the backend (after the 100 Continue the client waited for).
      const request = this.#request;
      if (request === undefined || request.destroyed) this.#stream.consume(chunk.length);
      else if (request.write(chunk)) this.#stream.consume(chunk.length);
      else this.#owed += chunk.length;
      return;
    }
    const socket = this.#socket;
    if (socket === undefined && this.#status === 0) {
      if (this.#held.length + chunk.length > MAX_EARLY_UPGRADE_BYTES) this.#resetOverLimit();
      else this.#held.push(chunk);
      return;
    }
    // A refusal or a failed request: the client's bytes have nowhere to go.
    if (socket === undefined || socket.destroyed) this.#stream.consume(chunk.length);
    else this.#toBackend(socket, chunk);
  }

  onEnd(): void {
    if (!this.#upgrade) this.#request?.end();
    else if (this.#socket !== undefined) this.#socket.end();
    else if (this.#status === 0) this.#heldEnd = true;
  }

  /** Client bytes onto the upgraded backend socket; their credit returns once the socket took them. */
  #toBackend(socket: Duplex, chunk: Buffer): void {
    this.#recorder?.tunnelData('in', chunk);
    if (socket.write(chunk)) this.#stream.consume(chunk.length);
    else this.#owed += chunk.length;
  }

  /** No switch came (a refusal, a failed request): the held bytes are dropped, their credit returned. */
  #dropHeld(): void {
    const bytes = this.#held.take().length;
    this.#heldEnd = false;
    this.#stream.consume(bytes);
  }

  /**
   * More bytes before the 101 than an edge of today sends: an edge from before the limit, which passes on
   * a whole stream window per upgrade. Held, 200 such upgrades took the agent's whole session window and
   * every other stream of the tunnel stood still; dropped, the WebSocket would go on corrupted. The stream
   * is reset (its unconsumed bytes' session credit goes back with it): the edge answers the client as for
   * any failed upgrade (502). PROTOCOL_ERROR: the edge broke the protocol's limit (not REFUSED_STREAM: the
   * backend has the request, it must not be retried elsewhere).
   */
  #resetOverLimit(): void {
    this.#held.take();
    this.#heldEnd = false;
    this.#stream.reset(ErrorCode.PROTOCOL_ERROR);
    this.#request?.destroy();
    this.#options.onEarlyBytesOverLimit?.();
    this.#report(
      `the edge sent more than ${MAX_EARLY_UPGRADE_BYTES} bytes before the backend's answer (an older edge)`,
      'early_bytes_over_limit',
    );
  }

  #creditRequestBody(): void {
    if (this.#owed === 0) return;
    const owed = this.#owed;
    this.#owed = 0;
    this.#stream.consume(owed);
  }

  onReset(error: StreamResetError): void {
    this.#held.take();
    this.#request?.destroy();
    this.#socket?.destroy();
    this.#response?.destroy();
    const cancelled = error.protocolCode === ErrorCode.CANCEL;
    this.#report(
      cancelled ? 'client went away' : error.message,
      cancelled ? 'client_went_away' : 'stream_reset',
    );
  }

  onDrain(): void {
    this.#socket?.resume();
    this.#response?.resume();
  }

  #onUpgrade(res: IncomingMessage, socket: Duplex, rest: Buffer): void {
    if (this.#stream.closed) {
      socket.destroy();
      return;
    }
    this.#status = 101;
    this.#socket = socket;
    this.#recorder?.responseHead(101, res.rawHeaders, undefined, res.statusMessage);
    this.#sendHead(101, res.statusMessage ?? 'Switching Protocols', res.rawHeaders);
    if (rest.length > 0) {
      this.#recorder?.tunnelData('out', rest);
      this.#stream.write(rest);
    }
    socket.on('data', (chunk: Buffer) => {
      this.#recorder?.tunnelData('out', chunk);
      if (!this.#stream.write(chunk)) socket.pause();
    });
    socket.on('drain', () => this.#creditRequestBody());
    socket.on('end', () => {
      this.#stream.end();
      this.#report(undefined);
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      if (!this.#stream.closed && !this.#stream.localEnded) this.#stream.reset(ErrorCode.BACKEND_ERROR);
      this.#report(undefined);
    });
    // What the client sent before the 101, in order, then its end if it came too.
    const held = this.#held.take();
    if (held.length > 0) this.#toBackend(socket, held);
    if (this.#heldEnd) socket.end();
  }

  /** A final response (for an upgrade: a refusal of the handshake): relayed with its body. */
  #onResponse(res: IncomingMessage): void {
    if (this.#stream.closed) {
      res.destroy();
      return;
    }
    this.#status = res.statusCode ?? 502;
    this.#response = res;
    this.#dropHeld();
    const headers = withoutHopByHop(res.rawHeaders);
    this.#recorder?.responseHead(this.#status, headers, undefined, res.statusMessage);
    this.#sendHead(this.#status, res.statusMessage ?? '', headers);
    res.on('data', (chunk: Buffer) => {
      this.#recorder?.responseData(chunk);
      if (!this.#stream.write(chunk)) res.pause();
    });
    res.on('end', () => {
      // Trailers travel as a trailer head, as on the undici path; never merged into the header section.
      if (res.rawTrailers.length > 0 && !this.#stream.closed) {
        this.#stream.sendHeaders(
          encodeResponseHead(
            { status: 200, statusMessage: '', headers: res.rawTrailers },
            this.#options.maxHeadSize,
          ),
          true,
        );
      } else this.#stream.end();
      this.#report(undefined);
    });
    res.on('error', (err) => this.#failMidResponse(err));
  }

  /** The backend died after its head went out: the client must see the response aborted. */
  #failMidResponse(err: Error): void {
    if (!this.#stream.closed) this.#stream.reset(ErrorCode.BACKEND_ERROR);
    const code = backendErrorCode(err);
    this.#report(`backend failed mid-response: ${code}`, code);
  }

  #onError(err: Error): void {
    // A flood of interim heads was answered already: the error is the request dropped for it.
    if (this.#stream.closed || this.#interim > MAX_INTERIM_HEADS) return;
    if (this.#status !== 0) {
      this.#failMidResponse(err);
      return;
    }
    this.#answerError(describeBackendError(err, this.#options.target.host, this.#answerBegun));
  }

  /** The agent's own answer for a backend that gave no usable head (before any final head went out). */
  #answerError(answer: BackendErrorAnswer): void {
    this.#status = answer.status;
    this.#dropHeld();
    sendBackendErrorAnswer(this.#stream, answer, this.#options.maxHeadSize, this.#recorder, {
      method: this.#head?.method ?? 'GET',
      headers: this.#head?.headers ?? [],
      target: this.#options.target,
    });
    this.#report(answer.message, answer.code);
  }

  /**
   * An interim (1xx) head from the backend, passed on as the undici path does (forward-headers.ts
   * `responseFields`): hop-by-hop fields out. One past the edge's own bound (MAX_INTERIM_HEADS) fails the
   * exchange here, as the edge would: the backend request is dropped and the client gets a 502 of the
   * agent's saying why, instead of heads the edge only discards after decoding each.
   */
  #onInterim(status: number, statusMessage: string, raw: string[]): void {
    // Past the bound, heads already in the parser's buffer still arrive: the first one past it fails the
    // exchange, the rest are dropped.
    if (this.#stream.closed || status === 101 || this.#interim > MAX_INTERIM_HEADS) return;
    if (++this.#interim > MAX_INTERIM_HEADS) {
      this.#request?.destroy();
      this.#answerError({
        status: 502,
        message: `tunnel2: backend on ${this.#options.target.host} sent more than ${MAX_INTERIM_HEADS} interim (1xx) responses`,
        code: 'TUNNEL2_ERR_BACKEND_INVALID_RESPONSE',
      });
      return;
    }
    this.#sendHead(status, statusMessage, withoutHopByHop(raw));
  }

  #sendHead(status: number, statusMessage: string, headers: string[]): void {
    this.#stream.sendHeaders(
      encodeResponseHead({ status, statusMessage, headers }, this.#options.maxHeadSize),
      false,
    );
  }

  #report(error: string | undefined, code = 'exchange_failed'): void {
    if (this.#reported) return;
    this.#reported = true;
    this.#recorder?.finish(error === undefined ? undefined : { code, message: error });
    this.#options.onReport({
      method: this.#head?.method ?? 'GET',
      path: this.#head?.target ?? '/',
      status: this.#status,
      durationMs: Math.round((performance.now() - this.#started) * 100) / 100,
      bytes: 0,
      ...(error === undefined ? {} : { error }),
    });
  }
}
