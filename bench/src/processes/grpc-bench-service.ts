import type { ServiceDefinition } from '@grpc/grpc-js';

/*
 * The gRPC service `pnpm bench grpc` measures, defined without a .proto: messages are raw bytes, so neither
 * side spends CPU on protobuf and what is measured is the transport. Echo answers its request; Pipe echoes
 * every message of a bidirectional stream.
 */

const raw = (buffer: Buffer): Buffer => buffer;

export const BENCH_SERVICE = {
  echo: {
    path: '/tunnel2.bench.Bench/Echo',
    requestStream: false,
    responseStream: false,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
  },
  pipe: {
    path: '/tunnel2.bench.Bench/Pipe',
    requestStream: true,
    responseStream: true,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
  },
} satisfies ServiceDefinition;
