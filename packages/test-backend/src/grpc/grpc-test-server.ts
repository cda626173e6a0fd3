import { EventEmitter } from 'node:events';
import { type Metadata, Server, ServerCredentials } from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import { invalidArgument } from '../errors.js';
import { TEST_SERVICE_NAME, type TestServiceMethod, testServicePackage } from './test-service-definition.js';
import { type GrpcTestServerEvents, testServiceHandlers } from './test-service-handlers.js';

export interface GrpcTestServerOptions {
  /** Address to listen on; default 127.0.0.1. */
  host?: string;
  /** Port; default 0 (any free port, see `port`). */
  port?: number;
  /** PEM key and certificate: serve TLS (ALPN h2) instead of h2c with prior knowledge. */
  tls?: { key: string; cert: string };
}

export interface GrpcTestServer {
  port: number;
  /** `host:port`, the form grpc clients and grpcurl take. */
  address: string;
  events: EventEmitter<GrpcTestServerEvents>;
  /** Resolves when the server sees `method`'s call (with that Wait tag, if given) cancelled. */
  nextCancel(method: TestServiceMethod, tag?: string): Promise<void>;
  /** Resolves with the request metadata of the next call to `method` (with that Wait tag, if given). */
  nextCall(method: TestServiceMethod, tag?: string): Promise<Metadata>;
  /** Stops listening and cancels every call in progress; idempotent. */
  close(): Promise<void>;
}

/**
 * A real @grpc/grpc-js server of tunnel2.test.v1.TestService with server reflection (so grpcurl can list
 * and call it), on h2c with prior knowledge as gRPC servers usually run, or on TLS.
 */
export async function startGrpcTestServer(options: GrpcTestServerOptions = {}): Promise<GrpcTestServer> {
  const host = options.host ?? '127.0.0.1';
  const port = options.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw invalidArgument(`port must be an integer in [0, 65535], got ${port}`);
  }
  const events = new EventEmitter<GrpcTestServerEvents>();
  const server = new Server();
  const pkg = testServicePackage();
  const service = pkg[TEST_SERVICE_NAME];
  if (service === undefined || !('Echo' in service))
    throw invalidArgument(`no ${TEST_SERVICE_NAME} in the proto`);
  server.addService(service, testServiceHandlers(events));
  new ReflectionService(pkg).addToServer(server);
  const credentials =
    options.tls === undefined
      ? ServerCredentials.createInsecure()
      : ServerCredentials.createSsl(
          null,
          [{ private_key: Buffer.from(options.tls.key), cert_chain: Buffer.from(options.tls.cert) }],
          false,
        );
  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${port}`, credentials, (err, actual) => (err ? reject(err) : resolve(actual))),
  );
  let closed: Promise<void> | undefined;
  return {
    port: bound,
    address: `${host}:${bound}`,
    events,
    nextCancel(method, tag) {
      return new Promise((resolve) => {
        const onCancel = (seen: TestServiceMethod, seenTag: string) => {
          if (seen !== method || (tag !== undefined && seenTag !== tag)) return;
          events.off('cancelled', onCancel);
          resolve();
        };
        events.on('cancelled', onCancel);
      });
    },
    nextCall(method, tag) {
      return new Promise((resolve) => {
        const onCall = (seen: TestServiceMethod, seenTag: string, metadata: Metadata) => {
          if (seen !== method || (tag !== undefined && seenTag !== tag)) return;
          events.off('call', onCall);
          resolve(metadata);
        };
        events.on('call', onCall);
      });
    },
    close() {
      closed ??= new Promise<void>((resolve) => {
        server.forceShutdown();
        resolve();
      });
      return closed;
    },
  };
}
