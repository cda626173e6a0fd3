export {
  createTestBackend,
  type TestBackend,
  type TestBackendOptions,
  type TestBackendStats,
  type TestBackendEvents,
} from './create-test-backend.js';
export { deterministicChunks, deterministicSha256, BYTES_CHUNK_SIZE } from './deterministic-bytes.js';
export { endpoints } from './endpoints.js';
