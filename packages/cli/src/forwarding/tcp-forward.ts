import { bridgeSocket, decodeTcpHead, ErrorCode, errorCodeName, type MuxStream } from '@tunnel2/protocol';
import type { TcpTarget } from './target.js';

// Not an `import`: an ESM import of node:net reads every export, and its `BlockList` and `SocketAddress`
// getters load both, which the agent never uses (bench/README.md, issue #34: the workspace agent's idle RSS).
const { connect } = process.getBuiltinModule('node:net');

/** One public client's connection through a TCP tunnel, reported when it ends. */
export interface TcpConnectionReport {
  clientAddress: string;
  clientPort: number;
  /** Bytes from the public client to the target. */
  bytesIn: number;
  /** Bytes from the target to the public client. */
  bytesOut: number;
  durationMs: number;
  /**
   * closed: both sides finished; reset: either side aborted (also the public client leaving before the
   * target answered); refused: the target refused the connection; unreachable: the target could not be
   * reached (no answer within the connect timeout, no route, unknown host).
   */
  outcome: 'closed' | 'reset' | 'refused' | 'unreachable';
  /** Why, when not closed: the socket error code (ECONNREFUSED, ETIMEDOUT) or the wire code (CANCEL). */
  error?: string;
}

/** How long a connect to the target may take: as the HTTP path's backend connect timeout (undici's). */
export const TCP_CONNECT_TIMEOUT_MS = 10_000;

/**
 * Serves one TCP stream: connects to the target when the stream's head arrives and carries the bytes both
 * ways (see bridgeSocket). A target that refuses, or does not answer within `connectTimeoutMs`, closes the
 * public connection with a RESET.
 */
export function forwardTcpStream(
  stream: MuxStream,
  target: TcpTarget,
  onReport: (report: TcpConnectionReport) => void,
  connectTimeoutMs = TCP_CONNECT_TIMEOUT_MS,
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
      // Else a silent target holds the public connection and a stream slot for the OS's SYN timeout.
      const timer = setTimeout(() => socket.destroy(connectTimedOut(connectTimeoutMs)), connectTimeoutMs);
      socket.once('connect', () => {
        connected = true;
        clearTimeout(timer);
      });
      socket.once('close', () => clearTimeout(timer));
      bridgeSocket(stream, socket, {
        socketResetCode: () => (connected ? ErrorCode.BACKEND_ERROR : ErrorCode.BACKEND_UNREACHABLE),
        onClose: (result) => {
          const code = (result.error as NodeJS.ErrnoException | undefined)?.code;
          const reason =
            code ?? (result.resetCode === undefined ? undefined : errorCodeName(result.resetCode));
          // Refused or unreachable only when the connect itself failed: a RESET from the edge before the
          // target answered (the public client left) is a reset.
          const failedConnect = !connected && result.resetBy === 'socket' && code !== undefined;
          onReport({
            clientAddress: head.clientAddress,
            clientPort: head.clientPort,
            bytesIn: result.bytesToSocket,
            bytesOut: result.bytesFromSocket,
            durationMs: performance.now() - started,
            outcome:
              result.resetCode === undefined
                ? 'closed'
                : !failedConnect
                  ? 'reset'
                  : code === 'ECONNREFUSED'
                    ? 'refused'
                    : 'unreachable',
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

function connectTimedOut(ms: number): NodeJS.ErrnoException {
  return Object.assign(new Error(`the target did not answer within ${ms} ms`), { code: 'ETIMEDOUT' });
}
