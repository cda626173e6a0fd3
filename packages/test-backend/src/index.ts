export {
  createTestBackend,
  type TestBackend,
  type TestBackendEvents,
  type TestBackendOptions,
  type TestBackendStats,
} from './create-test-backend.js';
export { BYTES_CHUNK_SIZE, deterministicChunks, deterministicSha256 } from './deterministic-bytes.js';
export { TestBackendError, TestBackendErrorCode } from './errors.js';
export { type EndpointInfo, endpoints } from './routes.js';
