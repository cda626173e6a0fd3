export {
  createTestBackend,
  type TestBackend,
  type TestBackendEvents,
  type TestBackendOptions,
  type TestBackendStats,
} from './create-test-backend.js';
export { BYTES_CHUNK_SIZE, deterministicChunks, deterministicSha256 } from './deterministic-bytes.js';
export { endpoints } from './endpoints.js';
