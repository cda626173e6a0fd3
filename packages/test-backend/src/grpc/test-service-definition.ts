import { fileURLToPath } from 'node:url';
import type { MethodDefinition } from '@grpc/grpc-js';
import { loadSync, type PackageDefinition } from '@grpc/proto-loader';
import { TestBackendError, TestBackendErrorCode } from '../errors.js';

/** The .proto the service is built from (shipped beside dist/, read at run time as grpc servers do). */
export const TEST_SERVICE_PROTO: string = fileURLToPath(
  new URL('../../proto/tunnel2_test.proto', import.meta.url),
);

/** Fully qualified service name, as reflection lists it and as it appears in the call path. */
export const TEST_SERVICE_NAME = 'tunnel2.test.v1.TestService';

// Messages as proto-loader decodes them with the options below: camelCase fields, int64 as number (the
// values stay far below 2^53), bytes as Buffer, absent fields as their defaults.
export interface EchoRequest {
  message: string;
  payload?: Buffer;
}
export interface EchoReply {
  message: string;
  payload: Buffer;
}
export interface CountRequest {
  count: number;
}
export interface CountReply {
  index: number;
}
export interface SumRequest {
  value: number;
}
export interface SumReply {
  sum: number;
  count: number;
}
export interface ChatMessage {
  text: string;
}
export interface WaitRequest {
  tag: string;
}
export type WaitReply = Record<string, never>;
export interface FailRequest {
  code: number;
  message: string;
  detail?: Buffer;
}
export type FailReply = Record<string, never>;
export interface DownloadRequest {
  size: number;
  chunkSize?: number;
}
export interface Chunk {
  data: Buffer;
}
export interface UploadReply {
  bytes: number;
  sha256: string;
}

/** Request and reply types by method name. */
export interface TestServiceMethods {
  Echo: [EchoRequest, EchoReply];
  Count: [CountRequest, CountReply];
  Sum: [SumRequest, SumReply];
  Chat: [ChatMessage, ChatMessage];
  Wait: [WaitRequest, WaitReply];
  Fail: [FailRequest, FailReply];
  Download: [DownloadRequest, Chunk];
  Upload: [Chunk, UploadReply];
}
export type TestServiceMethod = keyof TestServiceMethods;

let loaded: PackageDefinition | undefined;

/** The package definition (loaded once): what the server, the client and reflection are built from. */
export function testServicePackage(): PackageDefinition {
  loaded ??= loadSync(TEST_SERVICE_PROTO, { keepCase: false, longs: Number, enums: String, defaults: true });
  return loaded;
}

/** One method's definition (path, serializers), typed by its request and reply messages. */
export function testServiceMethod<M extends TestServiceMethod>(
  method: M,
): MethodDefinition<TestServiceMethods[M][0], TestServiceMethods[M][1]> {
  const service = testServicePackage()[TEST_SERVICE_NAME];
  const definition = service !== undefined && 'Echo' in service ? service[method] : undefined;
  if (definition === undefined) {
    throw new TestBackendError(
      TestBackendErrorCode.GRPC_PROTO,
      `${TEST_SERVICE_PROTO} lacks ${TEST_SERVICE_NAME}/${method}`,
    );
  }
  // proto-loader's definitions are typed for any object; the .proto fixes the shapes declared above.
  return definition as unknown as MethodDefinition<TestServiceMethods[M][0], TestServiceMethods[M][1]>;
}
