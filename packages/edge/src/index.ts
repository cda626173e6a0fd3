export type { PublicProtection } from './access/public-protection.js';
export { type AgentAuthOptions, createAgentAuthenticator, createSignedToken } from './agents/agent-auth.js';
export { AGENT_KEY_HEADER } from './agents/agent-endpoint.js';
export { isValidSessionName, randomSessionName, reservedNames } from './agents/session-name.js';
export { buildEdge, type Edge } from './build-edge.js';
export { type EdgeCommandIo, type EdgeServer, runEdgeCommand, startEdgeServer } from './edge-server.js';
export { EdgeError, EdgeErrorCode, statusByCode } from './errors.js';
export type { EdgeTls } from './listeners/public-port.js';
export { type AdminServer, answerOps, type OpsProbes, startAdminServer } from './operations/admin-server.js';
export { createEdgeLogger, redactedPaths } from './operations/edge-logger.js';
export { createEdgeMetrics, type EdgeMetrics, refusalReasonByCode } from './operations/metrics.js';
export { type IngressRoute, resolveIngressRoute } from './public/ingress-route.js';
export { ensureRequestId, installRequestIds, REQUEST_ID_HEADER } from './public/request-id.js';
export { MAX_STARTUP_WAITERS, StartupGrace } from './public/startup-grace.js';
export { parseEdgeCommand } from './settings/edge-args.js';
export {
  type EdgeSettings,
  edgeSettingSpecs,
  envOf,
  flagOf,
  redactedConfig,
} from './settings/edge-config.js';
export { edgeHelp } from './settings/edge-help.js';
export type { EdgeOptions, EdgeTlsOptions, ResolvedEdgeOptions } from './settings/edge-options.js';
export { type LoadedConfig, loadEdgeConfig, type SettingSource } from './settings/load-edge-config.js';
export { settingsReference } from './settings/settings-reference.js';
export { toEdgeOptions } from './settings/settings-to-options.js';
export { IpcRegistry, type IpcRegistryOptions, type WorkerChannel } from './workers/ipc-registry.js';
export { mergeWorkerMetrics } from './workers/merge-metrics.js';
export { serveRegistryCall } from './workers/registry-service.js';
export { RestartBudget } from './workers/restart-budget.js';
