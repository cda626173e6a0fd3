export { buildEdge, type Edge } from './build-edge.js';
export type { EdgeOptions, ResolvedEdgeOptions } from './edge-options.js';
export { EdgeError, EdgeErrorCode, statusByCode } from './errors.js';
export { AGENT_KEY_HEADER } from './agent-endpoint.js';
export { resolveIngressRoute, isValidSessionName, type IngressRoute } from './ingress-route.js';

export { reservedNames, randomSessionName } from './session-name.js';
