export { type Clock, systemClock } from './clock.js';
export { RegistryError, RegistryErrorCode } from './errors.js';
export { createMemoryRegistry, type MemoryRegistryOptions } from './memory-registry.js';
export type { ClaimInput, ClaimResult, SessionRecord, SessionRegistry } from './session-registry.js';
