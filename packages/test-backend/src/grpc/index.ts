export { type GrpcTestServer, type GrpcTestServerOptions, startGrpcTestServer } from './grpc-test-server.js';
export {
  type CallOutcome,
  type CallSettings,
  type PendingCall,
  TestServiceClient,
} from './test-service-client.js';
export {
  type ChatMessage,
  type Chunk,
  type CountReply,
  type CountRequest,
  type DownloadRequest,
  type EchoReply,
  type EchoRequest,
  type FailRequest,
  type SumReply,
  type SumRequest,
  TEST_SERVICE_NAME,
  TEST_SERVICE_PROTO,
  type TestServiceMethod,
  type TestServiceMethods,
  testServiceMethod,
  testServicePackage,
  type UploadReply,
  type WaitRequest,
} from './test-service-definition.js';
export { ECHO_METADATA_PREFIX, type GrpcTestServerEvents } from './test-service-handlers.js';
