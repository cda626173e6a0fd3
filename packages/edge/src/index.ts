export { type AgentAuthOptions, createAgentAuthenticator, createSignedToken } from './agent-auth.js';
export { AGENT_KEY_HEADER } from './agent-endpoint.js';
export { buildEdge, type Edge } from './build-edge.js';
export type { EdgeOptions, ResolvedEdgeOptions } from './edge-options.js';
export { EdgeError, EdgeErrorCode, statusByCode } from './errors.js';
export { type IngressRoute, isValidSessionName, resolveIngressRoute } from './ingress-route.js';
export type { PublicProtection } from './public-protection.js';
export { randomSessionName, reservedNames } from './session-name.js';
