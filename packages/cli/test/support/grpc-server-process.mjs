// The gRPC test service (@grpc/grpc-js, h2c) in its own process, so that a test can stop it (SIGSTOP): a
// backend whose connections stay open while it answers nothing, not even a PING. Prints one JSON line
// `{ "event": "listening", "port": n }` once listening, and `{ "event": "call", "method": m }` per call.
// (Plain JS: a child process runs it without the test runner's TypeScript transform.)
import { startGrpcTestServer } from '@tunnel2/test-backend/grpc';

const server = await startGrpcTestServer();
server.events.on('call', (method) => console.log(JSON.stringify({ event: 'call', method })));
console.log(JSON.stringify({ event: 'listening', port: server.port }));
process.once('SIGTERM', () => void server.close().then(() => process.exit(0)));
