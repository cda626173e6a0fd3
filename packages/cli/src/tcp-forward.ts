import { connect } from 'node:net';
import { bridgeSocket, decodeTcpHead, ErrorCode, errorCodeName, type MuxStream } from '@tunnel2/protocol';
import type { TcpTarget } from './target.js';

/** One public client's connection through a TCP tunnel, reported when it ends. */
export interface TcpConnectionReport {
  clientAddress: string;
  clientPort: number;
  /** Bytes from the public client to the target. */
  bytesIn: number;
  /** Bytes from the target to the public client. */
  bytesOut: number;
  durationMs: number;
  /** closed: both sides finished; reset: either side aborted; refused: the target did not accept. */
  outcome: 'closed' | 'reset' | 'refused';
  /** Why, when not closed: the socket error code (ECONNREFUSED) or the wire code (CANCEL). */
  error?: string;
}

/**
 * Serves one TCP stream: connects to the target when the stream's head arrives and carries the bytes both
 * ways (see bridgeSocket). A target that refuses closes the public connection at once, with a RESET.
 */
export function forwardTcpStream(
  stream: MuxStream,
  target: TcpTarget,
  onReport: (report: TcpConnectionReport) => void,
): void {
  stream.handler = {
    onHeaders(payload) {
      let head: ReturnType<typeof decodeTcpHead>;
      try {
        head = decodeTcpHead(payload);
      } catch {
        // An HTTP request on a TCP tunnel's session: this agent has no HTTP target to send it to.
        stream.reset(ErrorCode.REFUSED_STREAM);
        return;
      }
      const started = performance.now();
      const socket = connect({ host: target.host, port: target.port, allowHalfOpen: true, noDelay: true });
      let connected = false;
      socket.once('connect', () => {
        connected = true;
      });
      bridgeSocket(stream, socket, {
        socketResetCode: () => (connected ? ErrorCode.BACKEND_ERROR : ErrorCode.BACKEND_UNREACHABLE),
        onClose: (result) => {
          const reason =
            (result.error as NodeJS.ErrnoException | undefined)?.code ??
            (result.resetCode === undefined ? undefined : errorCodeName(result.resetCode));
          onReport({
            clientAddress: head.clientAddress,
            clientPort: head.clientPort,
            bytesIn: result.bytesToSocket,
            bytesOut: result.bytesFromSocket,
            durationMs: performance.now() - started,
            outcome: result.resetCode === undefined ? 'closed' : connected ? 'reset' : 'refused',
            ...(reason === undefined ? {} : { error: reason }),
          });
        },
      });
    },
    onData: () => {},
    onEnd: () => {},
    onReset: () => {},
    onDrain: () => {},
  };
}
