export { type AdminServer, answerOps, type OpsProbes, startAdminServer } from './admin-server.js';
export { type AgentAuthOptions, createAgentAuthenticator, createSignedToken } from './agent-auth.js';
export { AGENT_KEY_HEADER } from './agent-endpoint.js';
export { buildEdge, type Edge } from './build-edge.js';
export { parseEdgeCommand } from './edge-args.js';
export {
  type EdgeSettings,
  edgeSettingSpecs,
  envOf,
  flagOf,
  type LoadedConfig,
  loadEdgeConfig,
  redactedConfig,
  type SettingSource,
  settingsReference,
} from './edge-config.js';
export { edgeHelp } from './edge-help.js';
export { createEdgeLogger, redactedPaths } from './edge-logger.js';
export type { EdgeOptions, ResolvedEdgeOptions } from './edge-options.js';
export { type EdgeCommandIo, type EdgeServer, runEdgeCommand, startEdgeServer } from './edge-server.js';
export { EdgeError, EdgeErrorCode, statusByCode } from './errors.js';
export { type IngressRoute, isValidSessionName, resolveIngressRoute } from './ingress-route.js';
export { createEdgeMetrics, type EdgeMetrics, refusalReasonByCode } from './metrics.js';
export type { PublicProtection } from './public-protection.js';
export { ensureRequestId, installRequestIds, REQUEST_ID_HEADER } from './request-id.js';
export { randomSessionName, reservedNames } from './session-name.js';
export { toEdgeOptions } from './settings-to-options.js';
export { MAX_STARTUP_WAITERS, StartupGrace } from './startup-grace.js';
