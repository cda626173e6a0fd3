import type { Duplex } from 'node:stream';
import type { StreamResetError } from '../errors.js';
import type { MuxStream } from '../session/mux-stream.js';

/** A TCP socket as the bridge needs it: a duplex that can also close with RST (net.Socket). */
export type BridgedSocket = Duplex & { resetAndDestroy(): unknown; readonly connecting: boolean };

/** How one bridged connection ended, for the owner's report and metrics. */
export interface BridgeResult {
  /** Bytes read from the socket and sent on the stream. */
  bytesFromSocket: number;
  /** Bytes received on the stream and written to the socket. */
  bytesToSocket: number;
  /** The wire code of the RESET that ended it (sent or received), or undefined for a clean close. */
  resetCode: number | undefined;
  /** Which side reset: the socket (it failed or closed early) or the stream (the peer, or the session). */
  resetBy: 'socket' | 'stream' | undefined;
  /** The socket's error, when there was one. */
  error: Error | undefined;
}

export interface BridgeOptions {
  /** The RESET code to send when the socket fails or closes before both directions ended. */
  socketResetCode: () => number;
  /** Once, after the socket has closed. */
  onClose: (result: BridgeResult) => void;
}

/**
 * Carries one TCP connection over one stream, both ways, as raw bytes. Backpressure both ways: the socket
 * is paused while the stream holds bytes beyond its credit, and stream credit goes back only once the
 * socket has taken the bytes, so a slow reader on either side stalls its writer at the window and memory
 * stays bounded. A FIN is END_STREAM and END_STREAM is a FIN, each direction on its own (half-close); a
 * RESET is an RST and an RST (or an early close) is a RESET.
 */
export function bridgeSocket(stream: MuxStream, socket: BridgedSocket, options: BridgeOptions): void {
  const result: BridgeResult = {
    bytesFromSocket: 0,
    bytesToSocket: 0,
    resetCode: undefined,
    resetBy: undefined,
    error: undefined,
  };
  // Bytes written to the socket after its buffer filled: their credit waits for the socket's 'drain'.
  let uncredited = 0;
  // One received message carries a DATA payload in several pieces (views of the WebSocket fragments) and
  // often several payloads: corked until the message is handled, they reach the socket in one write
  // instead of one system call each. The socket's high-water mark still bounds what it holds.
  let corked = false;
  const uncork = (): void => {
    corked = false;
    socket.uncork();
  };
  stream.handler = {
    onHeaders: () => {},
    onData: (chunk) => {
      result.bytesToSocket += chunk.length;
      if (!corked) {
        corked = true;
        socket.cork();
        process.nextTick(uncork);
      }
      // Once the socket's buffer is full, every later chunk waits for the same 'drain'.
      if (socket.write(chunk) && uncredited === 0) stream.consume(chunk.length);
      else uncredited += chunk.length;
    },
    onEnd: () => socket.end(),
    onReset: (error: StreamResetError) => {
      result.resetCode = error.protocolCode;
      result.resetBy = 'stream';
      // Node defers an RST on a socket still connecting until it connects: to a target that never answers,
      // that is the OS's SYN timeout (minutes) with the socket held. Not connected, there is nothing to reset.
      if (socket.connecting) socket.destroy();
      else socket.resetAndDestroy();
    },
    onDrain: () => socket.resume(),
  };
  socket.on('drain', () => {
    const bytes = uncredited;
    uncredited = 0;
    stream.consume(bytes);
  });
  socket.on('data', (chunk: Buffer) => {
    result.bytesFromSocket += chunk.length;
    if (!stream.write(chunk)) socket.pause();
  });
  socket.on('end', () => stream.end());
  socket.on('error', (err: Error) => {
    result.error ??= err;
  });
  socket.on('close', () => {
    // Both directions done: what the stream still holds goes out as credit arrives. Otherwise the socket
    // failed or closed early, and the peer must not take that for a clean end: RESET.
    if (!stream.closed && !(stream.localEnded && stream.remoteEnded)) {
      const code = options.socketResetCode();
      result.resetCode = code;
      result.resetBy = 'socket';
      stream.reset(code);
    } else if (uncredited > 0) {
      stream.consume(uncredited);
      uncredited = 0;
    }
    options.onClose(result);
  });
}
