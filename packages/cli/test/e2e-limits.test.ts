import { once } from 'node:events';
import { request } from 'node:http';
import { connect as netConnect, type Socket } from 'node:net';
import { ErrorCode } from '@tunnel2/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { crashedAgent } from './support/crashed-agent.js';
import { send } from './support/http-client.js';
import { type Stack, startStack, until } from './support/stack.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function stack(options: Parameters<typeof startStack>[0]): Promise<Stack> {
  const started = await startStack(options);
  cleanups.push(() => started.close());
  return started;
}

const get = (s: Stack, path: string) => send({ port: s.port, path, headers: ['Host', s.host] });

describe('concurrent streams per session: a bounded wait for a slot, then 503', () => {
  it('a request beyond the limit waits for a free slot and is then served', async () => {
    const s = await stack({ name: 'slots', edge: { maxStreamsPerSession: 2, streamWaitMs: 10_000 } });
    const slow = [get(s, '/loadtest/delay/300'), get(s, '/loadtest/delay/300')];
    await until(() => s.edge.inFlight === 2);
    const queued = get(s, '/loadtest/delay/0');
    await until(() => s.edge.sessions.get('slots')?.slots.waiting === 1);
    const results = await Promise.all([...slow, queued]);
    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(s.edge.sessions.get('slots')?.slots.waiting).toBe(0);
  });

  it('no slot within the wait → 503 TUNNEL2_ERR_TUNNEL_BUSY with Retry-After; a full queue answers at once', async () => {
    const s = await stack({
      name: 'full',
      edge: { maxStreamsPerSession: 1, streamWaitMs: 300, maxWaitingPerSession: 1 },
    });
    const holder = get(s, '/loadtest/delay/2000');
    await until(() => s.edge.inFlight === 1);
    const started = performance.now();
    const waited = get(s, '/loadtest/delay/0');
    await until(() => s.edge.sessions.get('full')?.slots.waiting === 1);
    // The queue holds one: the next is refused without waiting.
    const overflow = await get(s, '/loadtest/delay/0');
    expect(overflow.status).toBe(503);
    expect(overflow.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_TUNNEL_BUSY');
    expect(overflow.headers['retry-after']).toBe('1');
    const timedOut = await waited;
    expect(timedOut.status).toBe(503);
    expect(timedOut.headers['retry-after']).toBe('1');
    expect(performance.now() - started).toBeGreaterThanOrEqual(280);
    expect((await holder).status).toBe(200);
  });

  it('a client that disconnects while waiting leaves the queue, and never reaches the backend', async () => {
    const s = await stack({ name: 'leave', edge: { maxStreamsPerSession: 1, streamWaitMs: 10_000 } });
    const holder = get(s, '/loadtest/delay/500');
    await until(() => s.edge.inFlight === 1);
    const req = request({
      host: '127.0.0.1',
      port: s.port,
      path: '/echo/request?who=quitter',
      headers: { host: s.host },
      agent: false,
    });
    req.on('error', () => {});
    req.end();
    await until(() => s.edge.sessions.get('leave')?.slots.waiting === 1);
    req.destroy();
    await until(() => s.edge.sessions.get('leave')?.slots.waiting === 0);
    expect((await holder).status).toBe(200);
    const after = await get(s, '/echo/request?who=next');
    expect(after.status).toBe(200);
    // The holder and the request after it; the quitter never got a stream.
    expect(s.backend.stats.requests).toBe(2);
  });
});

describe('per-session request rate', () => {
  it('beyond the rate and its burst → 429 TUNNEL2_ERR_RATE_LIMITED with Retry-After', async () => {
    const s = await stack({ name: 'rate', edge: { sessionRequestRate: 2, sessionRequestBurst: 5 } });
    const statuses: number[] = [];
    let limited: Awaited<ReturnType<typeof get>> | undefined;
    for (let i = 0; i < 8; i++) {
      const res = await get(s, '/loadtest/delay/0');
      statuses.push(res.status);
      if (res.status === 429) limited ??= res;
    }
    // The burst of 5 passes (plus at most one token refilled meanwhile); the rest are refused.
    expect(statuses.filter((x) => x === 200).length).toBeGreaterThanOrEqual(5);
    expect(statuses.filter((x) => x === 200).length).toBeLessThanOrEqual(6);
    expect(statuses.slice(0, 5)).toEqual([200, 200, 200, 200, 200]);
    expect(limited?.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_RATE_LIMITED');
    expect(Number(limited?.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  });
});

/** Opens a raw connection and writes `text` one byte every `everyMs`; resolves with what it was answered. */
function dribble(port: number, text: string, everyMs: number): { done: Promise<string>; socket: Socket } {
  const socket = netConnect(port, '127.0.0.1');
  let answer = '';
  let i = 0;
  const timer = setInterval(() => {
    if (i < text.length && socket.writable) socket.write(text[i++]!);
  }, everyMs);
  socket.on('data', (chunk: Buffer) => {
    answer += chunk.toString('latin1');
  });
  socket.on('error', () => {});
  const done = once(socket, 'close').then(() => {
    clearInterval(timer);
    return answer;
  });
  return { done, socket };
}

describe('slow clients', () => {
  it('slow-loris: 100 clients dribbling headers are cut off with 408 while normal requests keep succeeding', async () => {
    const s = await stack({ name: 'loris', edge: { headersTimeoutMs: 1_000 } });
    const head = `GET / HTTP/1.1\r\nHost: ${s.host}\r\n${'X-Slow: aaaaaaaaaaaaaaaaaaaa\r\n'.repeat(20)}\r\n`;
    const started = performance.now();
    const slow = Array.from({ length: 100 }, () => dribble(s.port, head, 50));
    let served = 0;
    let cutOff = 0;
    void Promise.all(slow.map((c) => c.done)).then(() => {
      cutOff = slow.length;
    });
    // Normal traffic while they trickle: every request answers, and quickly.
    while (cutOff === 0) {
      const t = performance.now();
      const res = await get(s, '/loadtest/delay/0');
      expect(res.status).toBe(200);
      expect(performance.now() - t).toBeLessThan(1_000);
      served++;
    }
    const answers = await Promise.all(slow.map((c) => c.done));
    const elapsed = performance.now() - started;
    expect(served).toBeGreaterThan(10);
    for (const answer of answers) {
      expect(answer).toMatch(/^HTTP\/1\.1 408 /);
      expect(answer).toContain('x-tunnel2-error: TUNNEL2_ERR_REQUEST_TIMEOUT');
    }
    // Cut off after the head timeout (checked every 250 ms here), long before they could finish.
    expect(elapsed).toBeGreaterThanOrEqual(900);
    expect(elapsed).toBeLessThan(10_000);
  });

  it('a client that stops sending its body → 408, and the backend request is cancelled', async () => {
    const s = await stack({ name: 'body', edge: { headersTimeoutMs: 200, requestTimeoutMs: 600 } });
    const socket = netConnect(s.port, '127.0.0.1');
    socket.write(
      `POST /echo/request HTTP/1.1\r\nHost: ${s.host}\r\nContent-Length: 1000\r\n\r\n${'x'.repeat(100)}`,
    );
    let answer = '';
    socket.on('data', (chunk: Buffer) => {
      answer += chunk.toString('latin1');
    });
    await once(socket, 'close');
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toContain('TUNNEL2_ERR_REQUEST_TIMEOUT');
    await until(() => s.edge.inFlight === 0);
    await until(() => s.backend.stats.aborted === 1);
  });

  it('a request head over the size limit → 431 TUNNEL2_ERR_HEADERS_TOO_LARGE', async () => {
    const s = await stack({ name: 'big', edge: { maxHeaderBytes: 4096 } });
    const res = await send({
      port: s.port,
      path: '/',
      headers: ['Host', s.host, 'X-Big', 'b'.repeat(5000)],
    }).catch((err: Error) => err);
    expect(res).not.toBeInstanceOf(Error);
    if (res instanceof Error) return;
    expect(res.status).toBe(431);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_HEADERS_TOO_LARGE');
  });
});

describe('a short agent reconnect', () => {
  it('requests arriving while the agent reconnects wait for it instead of failing', async () => {
    const s = await stack({
      name: 'bounce',
      tunnel: { reconnect: { initialMs: 200, maxMs: 400 } },
      edge: { reconnectWaitMs: 10_000 },
    });
    const reconnecting = once(s.tunnel, 'reconnecting');
    s.edge.sessions.get('bounce')!.close(ErrorCode.GOING_AWAY, 'test: cut the agent off');
    await reconnecting;
    expect(s.edge.sessions.get('bounce')).toBeUndefined();
    const res = await get(s, '/echo/request?during=reconnect');
    expect(res.status).toBe(200);
    expect(s.edge.sessions.get('bounce')).toBeDefined();
  });

  it('an agent that does not come back within the wait → 502 TUNNEL2_ERR_TUNNEL_OFFLINE', async () => {
    const s = await stack({ name: 'away', edge: { reconnectWaitMs: 300 } });
    // The name's agent crashes (a graceful close would free the name at once: e2e-names-restart.test.ts).
    await s.tunnel.close(0);
    await crashedAgent({ target: s.backend.port, server: `http://127.0.0.1:${s.port}`, subdomain: 'away' });
    await until(() => s.edge.sessions.get('away') === undefined);
    const started = performance.now();
    const res = await get(s, '/');
    expect(res.status).toBe(502);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_TUNNEL_OFFLINE');
    expect(performance.now() - started).toBeGreaterThanOrEqual(280);
  });
});

describe('agent message size', () => {
  it('a WebSocket message over maxMessageSize closes that agent with 1009 before it is buffered; others keep serving', async () => {
    const s = await stack({ name: 'steady', edge: { maxMessageSize: 64 * 1024 } });
    const ws = new WebSocket(`ws://127.0.0.1:${s.port}/_tunnel2/connect?name=huge`);
    await once(ws, 'open');
    ws.send(Buffer.alloc(64 * 1024 + 1));
    const [code] = (await once(ws, 'close')) as [number];
    expect(code).toBe(1009);
    expect((await get(s, '/loadtest/delay/0')).status).toBe(200);
  });
});
