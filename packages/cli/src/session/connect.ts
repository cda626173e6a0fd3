import type { ConnectOptions } from './connect-options.js';
import { Tunnel } from './tunnel.js';

/** What connectTcp() takes: a TCP tunnel's options (no HTTP-only ones). */
export interface TcpConnectOptions
  extends Pick<
    ConnectOptions,
    'server' | 'token' | 'agentKey' | 'logger' | 'protocol' | 'reconnect' | 'agentPath' | 'allowIps'
  > {
  /** Local TCP target: a port (`5432`) or `host:port`. */
  target: string | number;
  /** A specific public port of the edge's TCP range; default any free one. */
  remotePort?: number;
  /** How long a connect to the target may take before the client is reset (default 10 s). */
  connectTimeoutMs?: number;
}

/**
 * Opens a TCP tunnel and resolves once the edge has given it a public port (`tunnel.url` is
 * `tcp://host:port`). Each connection is reported by a `connection` event when it ends; reconnects keep
 * the port.
 */
export async function connectTcp(options: TcpConnectOptions): Promise<Tunnel> {
  const { remotePort, connectTimeoutMs, ...rest } = options;
  return connect({ ...rest, inspect: false, tcp: { remotePort, connectTimeoutMs } });
}

/**
 * Opens a tunnel and resolves once it has a public URL (the localtunnel-style API). Rejects with an
 * AgentError when the first connection fails; once up, the tunnel reconnects by itself.
 */
export async function connect(options: ConnectOptions): Promise<Tunnel> {
  const tunnel = new Tunnel(options);
  // An 'error' event without a listener would throw; the caller may add its own.
  tunnel.on('error', () => {});
  await tunnel.start({ failFast: true });
  return tunnel;
}
