export { type Clock, systemClock } from './clock.js';
export { RegistryError, RegistryErrorCode } from './errors.js';
export {
  createMemoryRegistry,
  DEFAULT_SWEEP_INTERVAL_MS,
  type MemoryRegistry,
  type MemoryRegistryOptions,
} from './memory-registry.js';
export { isRedisUrl, parseRedisUrl, type RedisAddress, type RedisSeed, redactRedisUrl } from './redis-url.js';
export {
  checkClaimInput,
  checkEpoch,
  checkGrace,
  checkHeldLeases,
  checkName,
  checkNodeAnnouncement,
  checkNodeId,
  checkOwner,
  checkSpace,
  checkTtl,
  spaceOf,
} from './registry-arguments.js';
export type {
  ReplicaClaimResult,
  ReplicaHolder,
  ReplicaSet,
  ReplicaSetRegistry,
} from './replica-sets.js';
export type {
  ClaimInput,
  ClaimResult,
  HeldLease,
  NodeAnnouncement,
  NodeRecord,
  SessionRecord,
  SessionRegistry,
} from './session-registry.js';
