import {
  type CallOptions,
  type ChannelCredentials,
  type ChannelOptions,
  Client,
  type ClientDuplexStream,
  type ClientReadableStream,
  type ClientUnaryCall,
  type ClientWritableStream,
  Metadata,
  type ServiceError,
  type StatusObject,
} from '@grpc/grpc-js';
import {
  type TestServiceMethod,
  type TestServiceMethods,
  testServiceMethod,
} from './test-service-definition.js';

type Req<M extends TestServiceMethod> = TestServiceMethods[M][0];
type Res<M extends TestServiceMethod> = TestServiceMethods[M][1];

/** How one unary or client-streaming call ended: the reply or the error, headers and the final status. */
export interface CallOutcome<R> {
  reply: R | undefined;
  error: ServiceError | undefined;
  /** Response headers (initial metadata), when the server sent any before the status. */
  headers: Metadata | undefined;
  /** grpc-status, grpc-message and the trailers (`status.metadata`). */
  status: StatusObject;
}

export interface PendingCall<R, C> {
  call: C;
  outcome: Promise<CallOutcome<R>>;
}

export interface CallSettings {
  metadata?: Metadata;
  options?: CallOptions;
}

/**
 * A typed @grpc/grpc-js client of tunnel2.test.v1.TestService, without generated code: every call goes
 * through grpc-js's own Client with the serializers proto-loader built from the .proto.
 */
export class TestServiceClient {
  readonly client: Client;

  constructor(address: string, credentials: ChannelCredentials, options: ChannelOptions = {}) {
    this.client = new Client(address, credentials, options);
  }

  /** A unary call (Echo, Wait, Fail). */
  unary<M extends 'Echo' | 'Wait' | 'Fail'>(
    method: M,
    request: Req<M>,
    settings: CallSettings = {},
  ): PendingCall<Res<M>, ClientUnaryCall> {
    const m = testServiceMethod(method);
    const result = settle<Res<M>>();
    const call = this.client.makeUnaryRequest(
      m.path,
      m.requestSerialize,
      m.responseDeserialize,
      request,
      settings.metadata ?? new Metadata(),
      settings.options ?? {},
      result.callback,
    );
    return { call, outcome: result.watch(call) };
  }

  /** A client-streaming call (Sum, Upload): write the requests, end(), then await `outcome`. */
  clientStream<M extends 'Sum' | 'Upload'>(
    method: M,
    settings: CallSettings = {},
  ): PendingCall<Res<M>, ClientWritableStream<Req<M>>> {
    const m = testServiceMethod(method);
    const result = settle<Res<M>>();
    const call = this.client.makeClientStreamRequest(
      m.path,
      m.requestSerialize,
      m.responseDeserialize,
      settings.metadata ?? new Metadata(),
      settings.options ?? {},
      result.callback,
    );
    return { call, outcome: result.watch(call) };
  }

  /** A server-streaming call (Count, Download). */
  serverStream<M extends 'Count' | 'Download'>(
    method: M,
    request: Req<M>,
    settings: CallSettings = {},
  ): ClientReadableStream<Res<M>> {
    const m = testServiceMethod(method);
    return this.client.makeServerStreamRequest(
      m.path,
      m.requestSerialize,
      m.responseDeserialize,
      request,
      settings.metadata ?? new Metadata(),
      settings.options,
    );
  }

  /** The bidirectional call (Chat). */
  bidi(settings: CallSettings = {}): ClientDuplexStream<Req<'Chat'>, Res<'Chat'>> {
    const m = testServiceMethod('Chat');
    return this.client.makeBidiStreamRequest(
      m.path,
      m.requestSerialize,
      m.responseDeserialize,
      settings.metadata ?? new Metadata(),
      settings.options,
    );
  }

  close(): void {
    this.client.close();
  }
}

/** Collects a call's callback, headers and status into one promise (grpc-js calls back before 'status'). */
function settle<R>() {
  let reply: R | undefined;
  let error: ServiceError | undefined;
  let headers: Metadata | undefined;
  return {
    callback(err: ServiceError | null, value?: R) {
      error = err ?? undefined;
      reply = value;
    },
    watch(call: ClientUnaryCall | ClientWritableStream<unknown>): Promise<CallOutcome<R>> {
      call.on('metadata', (metadata: Metadata) => {
        headers = metadata;
      });
      return new Promise((resolve) => {
        call.on('status', (status: StatusObject) => resolve({ reply, error, headers, status }));
      });
    },
  };
}
