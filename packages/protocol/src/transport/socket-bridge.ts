import type { Duplex } from 'node:stream';
import { ErrorCode } from '../constants.js';
import type { StreamResetError } from '../errors.js';
import type { MuxStream, StreamHandler } from '../session/mux-stream.js';

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
  /**
   * The stream was refused (RESET REFUSED_STREAM) before its peer sent anything: the peer never took the
   * connection (an agent going away). Another stream for it, with its head already sent, carries the
   * connection on, the socket's bytes so far sent again; undefined resets the socket like every other reset.
   * Asked only while the socket's bytes so far fit in REFUSAL_REPLAY_BYTES.
   */
  refused?: () => MuxStream | undefined;
}

/** Socket bytes kept for a refused stream's replacement (bridgeSocket's `refused`); beyond, none is tried. */
export const REFUSAL_REPLAY_BYTES = 64 * 1024;

/**
 * Carries one TCP connection over one stream, both ways, as raw bytes. Backpressure both ways: the socket
 * is paused while the stream holds bytes beyond its credit, and stream credit goes back only once the
 * socket has taken the bytes, so a slow reader on either side stalls its writer at the window and memory
 * stays bounded. A FIN is END_STREAM and END_STREAM is a FIN, each direction on its own (half-close); a
 * RESET is an RST and an RST (or an early close) is a RESET.
 */
export function bridgeSocket(first: MuxStream, socket: BridgedSocket, options: BridgeOptions): void {
  let stream = first;
  // The socket's bytes sent so far, kept while the stream's peer has sent nothing (a refusal replays them).
  let replay: Buffer[] | undefined = options.refused === undefined ? undefined : [];
  let replayBytes = 0;
  let socketEnded = false;
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
  const handler: StreamHandler = {
    onHeaders: () => {
      replay = undefined;
    },
    onData: (chunk) => {
      replay = undefined;
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
    onEnd: () => {
      replay = undefined;
      socket.end();
    },
    onReset: (error: StreamResetError) => {
      const again = replay !== undefined && error.protocolCode === ErrorCode.REFUSED_STREAM;
      const next = again ? options.refused?.() : undefined;
      if (next !== undefined) {
        stream = next;
        stream.handler = handler;
        for (const chunk of replay ?? []) stream.write(chunk);
        if (socketEnded) stream.end();
        socket.resume();
        return;
      }
      replay = undefined;
      result.resetCode = error.protocolCode;
      result.resetBy = 'stream';
      // Node defers an RST on a socket still connecting until it connects: to a target that never answers,
      // that is the OS's SYN timeout (minutes) with the socket held. Not connected, there is nothing to reset.
      if (socket.connecting) socket.destroy();
      else socket.resetAndDestroy();
    },
    onDrain: () => socket.resume(),
  };
  stream.handler = handler;
  socket.on('drain', () => {
    const bytes = uncredited;
    uncredited = 0;
    stream.consume(bytes);
  });
  socket.on('data', (chunk: Buffer) => {
    result.bytesFromSocket += chunk.length;
    if (replay !== undefined) {
      replayBytes += chunk.length;
      if (replayBytes > REFUSAL_REPLAY_BYTES) replay = undefined;
      else replay.push(Buffer.from(chunk));
    }
    if (!stream.write(chunk)) socket.pause();
  });
  socket.on('end', () => {
    socketEnded = true;
    stream.end();
  });
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
