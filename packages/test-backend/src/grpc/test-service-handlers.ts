import { createHash } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import { once } from 'node:events';
import {
  Metadata,
  type ServerDuplexStream,
  type ServerReadableStream,
  type ServerUnaryCall,
  type ServerWritableStream,
  type sendUnaryData,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import { deterministicChunks } from '../deterministic-bytes.js';
import type {
  ChatMessage,
  Chunk,
  CountReply,
  CountRequest,
  DownloadRequest,
  EchoReply,
  EchoRequest,
  FailReply,
  FailRequest,
  SumReply,
  SumRequest,
  TestServiceMethod,
  UploadReply,
  WaitReply,
  WaitRequest,
} from './test-service-definition.js';

/** What the test service reports to the test that started it. */
export interface GrpcTestServerEvents {
  /** A call reached a handler: its method, the Wait tag ('' for others), and the request metadata. */
  call: [method: TestServiceMethod, tag: string, metadata: Metadata];
  /** The server saw a call cancelled by its client (or by its deadline) before it answered. */
  cancelled: [method: TestServiceMethod, tag: string];
}

/** Request metadata whose key starts with this comes back in Echo's headers and trailers. */
export const ECHO_METADATA_PREFIX = 'x-echo-';

type Server = EventEmitter<GrpcTestServerEvents>;

/** Writes, and waits for 'drain' when the call's buffer is full: a slow reader never grows memory here. */
async function write<T>(call: ServerWritableStream<unknown, T> | ServerDuplexStream<unknown, T>, value: T) {
  if (!call.write(value)) await Promise.race([once(call, 'drain'), once(call, 'cancelled')]);
}

function watch(
  events: Server,
  method: TestServiceMethod,
  call: { on(e: 'cancelled', f: () => void): unknown },
) {
  call.on('cancelled', () => events.emit('cancelled', method, ''));
}

/** The handlers of tunnel2.test.v1.TestService (see proto/tunnel2_test.proto). */
export function testServiceHandlers(events: Server): UntypedServiceImplementation {
  return {
    Echo(call: ServerUnaryCall<EchoRequest, EchoReply>, callback: sendUnaryData<EchoReply>) {
      events.emit('call', 'Echo', '', call.metadata);
      const echoed = new Metadata();
      for (const [key, values] of Object.entries(call.metadata.toJSON())) {
        if (!key.startsWith(ECHO_METADATA_PREFIX)) continue;
        for (const value of values) echoed.add(key, value);
      }
      call.sendMetadata(echoed);
      callback(
        null,
        { message: call.request.message, payload: call.request.payload ?? Buffer.alloc(0) },
        echoed.clone(),
      );
    },

    Count(call: ServerWritableStream<CountRequest, CountReply>) {
      events.emit('call', 'Count', '', call.metadata);
      watch(events, 'Count', call);
      void (async () => {
        for (let index = 0; index < call.request.count && !call.cancelled; index++)
          await write(call, { index });
        if (!call.cancelled) call.end();
      })();
    },

    Sum(call: ServerReadableStream<SumRequest, SumReply>, callback: sendUnaryData<SumReply>) {
      events.emit('call', 'Sum', '', call.metadata);
      watch(events, 'Sum', call);
      let sum = 0;
      let count = 0;
      call.on('data', (message: SumRequest) => {
        sum += message.value;
        count++;
      });
      call.on('end', () => callback(null, { sum, count }));
    },

    Chat(call: ServerDuplexStream<ChatMessage, ChatMessage>) {
      events.emit('call', 'Chat', '', call.metadata);
      watch(events, 'Chat', call);
      call.on('data', (message: ChatMessage) => {
        // Answered as it arrives; the duplex's own readable side pauses the reads while writes are backed up.
        if (!call.write({ text: `echo: ${message.text}` })) {
          call.pause();
          call.once('drain', () => call.resume());
        }
      });
      call.on('end', () => call.end());
    },

    Wait(call: ServerUnaryCall<WaitRequest, WaitReply>, _callback: sendUnaryData<WaitReply>) {
      const { tag } = call.request;
      call.on('cancelled', () => events.emit('cancelled', 'Wait', tag));
      events.emit('call', 'Wait', tag, call.metadata);
      // Never answered: only the client's cancel or deadline ends this call.
    },

    Fail(call: ServerUnaryCall<FailRequest, FailReply>, callback: sendUnaryData<FailReply>) {
      events.emit('call', 'Fail', '', call.metadata);
      const trailers = new Metadata();
      trailers.set('x-detail-bin', call.request.detail ?? Buffer.alloc(0));
      callback({ code: call.request.code, details: call.request.message, metadata: trailers });
    },

    Download(call: ServerWritableStream<DownloadRequest, Chunk>) {
      events.emit('call', 'Download', '', call.metadata);
      watch(events, 'Download', call);
      const chunkSize =
        call.request.chunkSize !== undefined && call.request.chunkSize > 0 ? call.request.chunkSize : 65_536;
      void (async () => {
        for (const block of deterministicChunks(call.request.size)) {
          for (let at = 0; at < block.length && !call.cancelled; at += chunkSize) {
            await write(call, { data: block.subarray(at, at + chunkSize) });
          }
          if (call.cancelled) return;
        }
        call.end();
      })();
    },

    Upload(call: ServerReadableStream<Chunk, UploadReply>, callback: sendUnaryData<UploadReply>) {
      events.emit('call', 'Upload', '', call.metadata);
      watch(events, 'Upload', call);
      const hash = createHash('sha256');
      let bytes = 0;
      call.on('data', (chunk: Chunk) => {
        hash.update(chunk.data);
        bytes += chunk.data.length;
      });
      call.on('end', () => callback(null, { bytes, sha256: hash.digest('hex') }));
    },
  };
}
