import { ErrorCode, errorCodeName, type GoAway, MuxSession, type MuxStream } from '@tunnel2/protocol';
import WebSocket from 'ws';

/**
 * A minimal in-process agent: one WebSocket and one protocol session, no undici, no CLI. Thousands of them
 * fit in the bench process, which is what the `sessions` scenario needs to load one edge with 10,000
 * sessions. Streams the edge opens go to `onStream` (or are refused when there is none).
 */
export interface LightAgent {
  readonly name: string;
  readonly session: MuxSession;
  /** Resolves once the session is over, with the reason when the edge ended it. */
  readonly closed: Promise<Error | undefined>;
  close(): void;
}

export interface LightAgentOptions {
  /** The edge's agent WebSocket URL, e.g. `ws://127.0.0.1:8080/_tunnel2/connect`. */
  agentUrl: string;
  /** Requested name; the edge picks one when absent. */
  name?: string;
  /** Anonymous agents are told apart by this key (the edge limits sessions per owner). */
  agentKey: string;
  onStream?: (stream: MuxStream) => void;
  handshakeTimeoutMs?: number;
}

function zeroMask(mask: Buffer): void {
  mask.fill(0);
}

export function connectLightAgent(options: LightAgentOptions): Promise<LightAgent> {
  return new Promise((resolve, reject) => {
    const url = new URL(options.agentUrl);
    if (options.name !== undefined) url.searchParams.set('name', options.name);
    const socket = new WebSocket(url, {
      perMessageDeflate: false,
      generateMask: zeroMask,
      headers: { 'x-tunnel2-agent-key': options.agentKey },
      handshakeTimeout: options.handshakeTimeoutMs ?? 30_000,
    });
    let settled = false;
    // What the edge said on its way out, so a handshake that ends early names the edge's reason.
    let goAway: GoAway | undefined;
    let socketClose: { code: number; reason: string } | undefined;
    const edgeSaid = (): string => {
      const parts = [
        goAway && `GOAWAY ${errorCodeName(goAway.code)}${goAway.reason ? `: ${goAway.reason}` : ''}`,
        socketClose &&
          `WebSocket close ${socketClose.code}${socketClose.reason ? ` ${socketClose.reason}` : ''}`,
      ].filter((part) => part !== undefined);
      return parts.length > 0 ? ` (${parts.join('; ')})` : ' (no GOAWAY, no close frame)';
    };
    let resolveClosed: (error: Error | undefined) => void = () => {};
    const closed = new Promise<Error | undefined>((r) => {
      resolveClosed = r;
    });
    const fail = (error: Error): void => {
      if (settled) return;
      settled = true;
      reject(error);
    };
    const session = new MuxSession({
      role: 'agent',
      transport: {
        send: (message, done) => socket.send(message, { binary: true, compress: false }, done),
        close: (code, reason) => socket.close(code, reason),
      },
      handler: {
        onHello: (hello) => {
          const name = hello.meta.name;
          if (typeof name !== 'string') {
            fail(new Error('the edge answered HELLO without a session name'));
            socket.terminate();
            return;
          }
          settled = true;
          resolve({ name, session, closed, close: () => session.close() });
        },
        onStream: (stream) => {
          if (options.onStream === undefined) stream.reset(ErrorCode.REFUSED_STREAM);
          else options.onStream(stream);
        },
        onGoAway: (frame) => {
          goAway = frame;
        },
        onClose: (error) => {
          fail(error ?? new Error(`the edge closed the session during the handshake${edgeSaid()}`));
          resolveClosed(error);
        },
      },
    });
    socket.on('open', () => session.sendHello({ agent: 'tunnel2-bench-light-agent' }, false));
    socket.on('message', (data, isBinary) => {
      if (isBinary) session.receive(data as Buffer);
    });
    socket.on('close', (code, reason) => {
      socketClose = { code, reason: reason.toString() };
      session.transportClosed();
    });
    socket.on('error', (err) => {
      fail(err);
      session.transportClosed(err);
    });
    socket.on('unexpected-response', (_req, res) => {
      fail(new Error(`the edge refused the agent with ${res.statusCode ?? 0}`));
      socket.terminate();
    });
  });
}
