export type { SessionRecord, ClaimInput, ClaimResult, SessionRegistry } from './session-registry.js';
export { createMemoryRegistry, type MemoryRegistryOptions } from './memory-registry.js';
export { type Clock, systemClock } from './clock.js';
export { RegistryError, RegistryErrorCode } from './errors.js';
