import type { Socket } from 'node:net';

/** The HTTP/2 connection preface (RFC 9113 §3.4): a client with prior knowledge opens with it. */
export const HTTP2_PREFACE: Buffer = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** Where a sniffed connection goes: HTTP/1.x with the bytes already read, or HTTP/2 (bytes put back). */
export interface SniffTargets {
  http1(socket: Socket, read: Buffer): void;
  http2(socket: Socket): void;
}

/**
 * Reads each new plain connection's first bytes and hands it to HTTP/1.x or, when they are the HTTP/2
 * preface, to HTTP/2 (h2c with prior knowledge, as a terminator speaking h2c upstream opens it). Decided
 * at the first byte that differs from the preface, so an HTTP/1.x request is handed over with its first
 * read; a preface split over several reads is gathered. A connection that stays silent, or stalls inside
 * the preface, is closed without an answer after `timeoutMs` (the headers timeout, which Node's HTTP/1.1
 * server would have applied to it; it only starts counting once the connection is handed over).
 */
export class PrefaceSniffer {
  readonly #timeoutMs: number;
  readonly #targets: SniffTargets;
  /** Connections not handed over yet: idle ones as far as a drain is concerned (they sent no request). */
  readonly #pending = new Set<Socket>();

  constructor(timeoutMs: number, targets: SniffTargets) {
    this.#timeoutMs = timeoutMs;
    this.#targets = targets;
  }

  sniff(socket: Socket): void {
    const pending = this.#pending;
    const targets = this.#targets;
    pending.add(socket);
    let read: Buffer | undefined;
    const timer = setTimeout(() => socket.destroy(), this.#timeoutMs);
    const settle = (): void => {
      clearTimeout(timer);
      pending.delete(socket);
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.pause();
    };
    const onClose = (): void => {
      clearTimeout(timer);
      pending.delete(socket);
    };
    const onData = (chunk: Buffer): void => {
      read = read === undefined ? chunk : Buffer.concat([read, chunk]);
      const n = Math.min(read.length, HTTP2_PREFACE.length);
      const preface = read.compare(HTTP2_PREFACE, 0, n, 0, n) === 0;
      if (preface && n < HTTP2_PREFACE.length) return;
      settle();
      if (preface) {
        socket.unshift(read);
        targets.http2(socket);
      } else {
        targets.http1(socket, read);
      }
    };
    socket.on('data', onData);
    socket.once('close', onClose);
  }

  /** Closes the connections that have not sent a request yet (the edge stops: as Node's idle ones). */
  closeIdle(): void {
    for (const socket of this.#pending) socket.destroy();
  }
}
