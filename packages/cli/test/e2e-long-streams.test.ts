import { type IncomingMessage, request } from 'node:http';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { send } from './support/http-client.js';
import { type SemanticsBackend, startSemanticsBackend } from './support/semantics-backend.js';
import { silent } from './support/stack.js';

// Long-lived streams: an SSE response idle between events must outlive every timer on its path, and a
// client that goes away must end the backend's stream.
//
// The timers an idle stream crosses, and why none of them cuts it (scripts/sse-soak.ts idles 10 minutes
// with every default in place):
// - the edge's response timeout covers only the wait for the response head (shortened here to 1 s);
// - session heartbeats keep the agent's WebSocket alive while no stream carries data (here every 25 ms);
// - the edge's public server has no socket-inactivity timeout by default (server.timeout 0, asserted below;
//   `idleTimeoutMs` is opt-in), and its request timeouts bound only the receipt of the request;
// - the agent's undici pool runs with bodyTimeout and headersTimeout 0 (its default bodyTimeout of 300 s
//   would cut a quiet stream): the edge owns the response timeout, and the public client decides how long
//   it will wait for the next byte.

const RESPONSE_TIMEOUT_MS = 1000;
const HEARTBEAT_MS = 25;

let backend: SemanticsBackend;
let edge: Edge;
let tunnel: Tunnel;
let port: number;
const reconnects: unknown[] = [];

beforeAll(async () => {
  backend = await startSemanticsBackend();
  edge = buildEdge({
    port: 0,
    logger: silent,
    responseTimeoutMs: RESPONSE_TIMEOUT_MS,
    protocol: { heartbeatIntervalMs: HEARTBEAT_MS },
  });
  ({ port } = await edge.listen());
  tunnel = await connect({ target: backend.port, server: edge.url, subdomain: 'long' });
  tunnel.on('reconnecting', (event) => reconnects.push(event));
});
afterAll(async () => {
  await tunnel.close(0);
  await edge.close(0);
  await backend.close();
});

/** The request target and Host of /idle-sse in either public URL form. */
const form = (via: 'host' | 'path') =>
  via === 'host'
    ? { path: '/idle-sse', host: `long.localhost:${port}` }
    : { path: '/session/long/idle-sse', host: `localhost:${port}` };

/** Opens an SSE request and resolves once its first event has arrived. */
function openStream(path: string, host: string) {
  return new Promise<{ res: IncomingMessage; destroy: () => void; rest: Promise<string> }>(
    (resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path, headers: { host }, agent: false });
      req.on('error', reject);
      req.on('response', (res) => {
        let text = '';
        const rest = new Promise<string>((done, fail) => {
          res.on('end', () => done(text));
          res.on('aborted', () => fail(new Error('stream aborted')));
        });
        rest.catch(() => {}); // only awaited by the tests that let the stream finish
        res.once('data', (first: Buffer) => {
          expect(first.toString()).toBe('data: first\n\n');
          res.on('data', (chunk: Buffer) => {
            text += chunk.toString();
          });
          resolve({ res, destroy: () => req.destroy(), rest });
        });
      });
      req.end();
    },
  );
}

describe('long-lived streams', () => {
  it('the public server has no socket-inactivity timeout that could cut a quiet stream', () => {
    expect(edge.app.server.timeout).toBe(0);
  });

  it('an SSE stream stays open while idle past the response timeout and many heartbeats, and the next event arrives', async () => {
    const idle = backend.nextIdleStream();
    const { path, host } = form('host');
    const stream = await openStream(path, host);
    const backendStream = await idle;
    // Wait for an event that proves the idle time: a sibling request that never gets a head is answered 504
    // by the same response timeout (1 s, 40 heartbeat intervals), while the SSE stream's head went out.
    const hung = await send({ port, path: '/hang', headers: ['Host', `long.localhost:${port}`] });
    expect(hung.status).toBe(504);
    expect(hung.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_RESPONSE_TIMEOUT');
    backendStream.send('after the silence');
    expect(await stream.rest).toBe('data: after the silence\n\n');
    expect(reconnects).toEqual([]);
  });

  for (const via of ['host', 'path'] as const) {
    it(`closing the client ends the backend's stream (${via} form)`, async () => {
      const { path, host } = form(via);
      const idle = backend.nextIdleStream();
      const stream = await openStream(path, host);
      const backendStream = await idle;
      stream.destroy();
      await backendStream.closed; // the backend's response saw 'close'
    });
  }
});
