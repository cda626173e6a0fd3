export { AgentError, AgentErrorCode } from './errors.js';
export type { RequestReport } from './forwarding/forward-options.js';
export { parseTarget, type Target } from './forwarding/target.js';
export type { TcpConnectionReport } from './forwarding/tcp-forward.js';
export type { SessionInfo, SessionStats } from './session/agent-session.js';
export { connect, connectTcp, type TcpConnectOptions } from './session/connect.js';
export type { ConnectOptions, InspectOptions } from './session/connect-options.js';
export { type ReconnectingEvent, Tunnel, type TunnelEvents } from './session/tunnel.js';
export {
  type ConnectManyOptions,
  connectMany,
  createTunnels,
  type NamedTunnelOptions,
} from './session/tunnel-group.js';
export { VERSION } from './version.js';
