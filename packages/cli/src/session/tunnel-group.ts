import { AgentError, AgentErrorCode } from '../errors.js';
import type { ConnectOptions } from './connect-options.js';
import { Tunnel } from './tunnel.js';

/** One tunnel of connectMany(): its name (output prefix) and its own options. */
export type NamedTunnelOptions = { name: string } & Pick<
  ConnectOptions,
  | 'target'
  | 'subdomain'
  | 'replica'
  | 'hostHeader'
  | 'basicAuth'
  | 'allowIps'
  | 'inspect'
  | 'tcp'
  | 'connections'
  | 'insecure'
  | 'h2c'
  | 'http1'
  | 'ca'
>;

/** What connectMany() takes: what the tunnels share (edge, token, logging) and the tunnels. */
export interface ConnectManyOptions
  extends Pick<
    ConnectOptions,
    'server' | 'token' | 'agentKey' | 'logger' | 'protocol' | 'reconnect' | 'agentPath' | 'configFile'
  > {
  tunnels: NamedTunnelOptions[];
}

/**
 * Several tunnels over one session (one WebSocket): the first tunnel owns the session, the others ride
 * on it. Close and reconnect through the returned tunnel; each of `tunnel.tunnels` has its own `info`,
 * `ready`, `request` and `connection` events. Throws on an empty list.
 */
export function createTunnels(options: ConnectManyOptions): Tunnel {
  const { tunnels: listed, ...shared } = options;
  // The edge joins a session's own name as a replica, never a listed one: the replica leads the session.
  const replicas = listed.filter((tunnel) => tunnel.replica === true);
  if (replicas.length > 1) {
    throw new AgentError(
      AgentErrorCode.INVALID_OPTION,
      `tunnels ${replicas.map((tunnel) => tunnel.name).join(', ')} say replica: true: one session carries at ` +
        'most one replica, start them separately (tunnel2 start <name>)',
    );
  }
  const tunnels = [...replicas, ...listed.filter((tunnel) => tunnel.replica !== true)];
  const [first, ...rest] = tunnels;
  if (first === undefined) throw new AgentError(AgentErrorCode.INVALID_OPTION, 'no tunnels to start');
  const own = (tunnel: NamedTunnelOptions): ConnectOptions => {
    const { name, ...fields } = tunnel;
    return { ...shared, ...fields, label: name };
  };
  return new Tunnel(
    own(first),
    rest.map((tunnel) => new Tunnel(own(tunnel))),
  );
}

/** Opens several tunnels over one session and resolves once all of them have their public URLs. */
export async function connectMany(options: ConnectManyOptions): Promise<Tunnel> {
  const tunnel = createTunnels(options);
  tunnel.on('error', () => {});
  await tunnel.start({ failFast: true });
  return tunnel;
}
