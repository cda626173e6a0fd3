export type { SessionInfo, SessionStats } from './agent-session.js';
export type { ConnectOptions, InspectOptions } from './connect-options.js';
export { AgentError, AgentErrorCode } from './errors.js';
export type { RequestReport } from './forward-options.js';
export { parseTarget, type Target } from './target.js';
export type { TcpConnectionReport } from './tcp-forward.js';
export {
  connect,
  connectTcp,
  type ReconnectingEvent,
  type TcpConnectOptions,
  Tunnel,
  type TunnelEvents,
} from './tunnel.js';
export {
  type ConnectManyOptions,
  connectMany,
  createTunnels,
  type NamedTunnelOptions,
} from './tunnel-group.js';
export { VERSION } from './version.js';
