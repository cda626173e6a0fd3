export { connect, Tunnel, type ConnectOptions, type TunnelEvents, type ReconnectingEvent } from './tunnel.js';
export type { SessionInfo } from './agent-session.js';
export type { RequestReport } from './forward-exchange.js';
export { AgentError, AgentErrorCode } from './errors.js';
export { parseTarget, type Target } from './target.js';
export { VERSION } from './version.js';
