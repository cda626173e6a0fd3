// The self-contained demo: an edge, a backend and an agent on loopback, then a request through the tunnel.

import { connect } from '@tunnel2/cli';
import { buildEdge } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { pino } from 'pino';

const keepRunning = !process.argv.includes('--once');
const backend = await createTestBackend();
const edge = buildEdge({ port: Number(process.env.PORT ?? 0), logger: pino({ level: 'warn' }) });
const { port, url } = await edge.listen();
// The inspector starts as `tunnel2 http` starts it: on 127.0.0.1, the first free port of 4040..4049.
const tunnel = await connect({ target: backend.port, server: url, subdomain: 'demo', inspect: {} });
tunnel.on('request', (r) => console.log(`  ${r.method} ${r.path} -> ${r.status} in ${r.durationMs} ms`));

const hostUrl = `http://demo.localhost:${port}/loadtest/get`;
const pathUrl = `${url}/session/demo/loadtest/get`.replace('127.0.0.1', 'localhost');
console.log(`backend (direct):  ${backend.url}`);
console.log(`edge:              ${url}`);
console.log(`tunnel URL:        ${tunnel.url}`);
console.log(`inspector:         ${tunnel.inspectorUrl}`);
console.log('\nTry it:');
console.log(`  curl ${hostUrl}`);
console.log(`  curl ${pathUrl}\n`);

const res = await fetch(`${url}/session/demo/loadtest/get`);
console.log(`demo request through the tunnel: ${res.status} ${(await res.text()).slice(0, 80)}...`);
console.log(`see it in the inspector: ${tunnel.inspectorUrl}`);

const stop = async (): Promise<void> => {
  await tunnel.close();
  await edge.close(1000);
  await backend.close();
  process.exit(0);
};
if (keepRunning) {
  console.log('\nPress Ctrl-C to stop.');
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());
} else {
  await stop();
}
