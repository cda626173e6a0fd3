import {
  Server,
  ServerCredentials,
  type ServerDuplexStream,
  type ServerUnaryCall,
  type sendUnaryData,
} from '@grpc/grpc-js';
import { BENCH_SERVICE } from './grpc-bench-service.js';

/*
 * The backend of `pnpm bench grpc`: a grpc-js server on a free loopback port (HTTP/2 with prior knowledge,
 * as gRPC servers speak). Prints {"event":"listening","url":"http://127.0.0.1:<port>"} when ready.
 */

const server = new Server();
server.addService(BENCH_SERVICE, {
  echo: (call: ServerUnaryCall<Buffer, Buffer>, done: sendUnaryData<Buffer>) => done(null, call.request),
  pipe: (call: ServerDuplexStream<Buffer, Buffer>) => {
    // Backpressure both ways: a message the client cannot take yet stops the reading of the next one.
    call.on('data', (message: Buffer) => {
      if (!call.write(message)) {
        call.pause();
        call.once('drain', () => call.resume());
      }
    });
    call.on('end', () => call.end());
    call.on('error', () => {});
  },
});
server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, port) => {
  if (err !== null) throw err;
  process.stdout.write(`${JSON.stringify({ event: 'listening', url: `http://127.0.0.1:${port}` })}\n`);
});
process.once('SIGTERM', () => server.tryShutdown(() => process.exit(0)));
