import { setTimeout as delay } from 'node:timers/promises';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { ErrorCode, type RequestHead } from '@tunnel2/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { h2c, h2Request } from './support/h2-client.js';
import { hostileAgent, responseHead } from './support/hostile-agent.js';
import { silent, until } from './support/stack.js';
import { twoNodes } from './support/two-nodes.js';

// A gRPC call's deadline counts from its arrival at the edge (as Envoy counts a route timeout from the
// request's arrival), not from when a stream to its agent opened: a call that waited for its agent (here
// in the startup grace, where a name nobody holds waits up to reconnectWaitMs for its agent) is answered
// DEADLINE_EXCEEDED at its deadline, and one that waited part of it reaches the agent with the time left
// in its grpc-timeout, as a gRPC client library passes a deadline on.

const RECONNECT_WAIT_MS = 10_000;

let edge: Edge;
let port: number;
const closers: (() => void)[] = [];

beforeAll(async () => {
  edge = buildEdge({
    port: 0,
    logger: silent,
    reconnectWaitMs: RECONNECT_WAIT_MS,
    startupGraceMs: 120_000,
  });
  ({ port } = await edge.listen());
});

afterAll(async () => {
  for (const close of closers) close();
  await edge.close(0);
});

const call = (name: string, timeout?: string) => ({
  ':method': 'POST',
  ':path': '/svc/Method',
  ':authority': `${name}.localhost:${port}`,
  'content-type': 'application/grpc',
  te: 'trailers',
  ...(timeout === undefined ? {} : { 'grpc-timeout': timeout }),
});

/** An agent for `name` that answers every call OK at once and keeps each request head it received. */
async function okAgent(name: string, at: Edge = edge, key?: string): Promise<RequestHead[]> {
  const received: RequestHead[] = [];
  closers.push(
    await hostileAgent(
      at.url,
      name,
      (stream, request) => {
        received.push(request);
        stream.sendHeaders(responseHead(200, ['content-type', 'application/grpc', 'grpc-status', '0']), true);
      },
      { http2: true },
      key === undefined ? {} : { headers: { 'x-tunnel2-agent-key': key } },
    ),
  );
  return received;
}

const unitMs: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 0.001, n: 0.000_001 };

/** The grpc-timeout a head carries, in ms (exactly, as its units say), after checking its form. */
function grpcTimeoutOf(head: RequestHead | undefined): number {
  const fields = head?.headers ?? [];
  const at = fields.findIndex((name, i) => i % 2 === 0 && name.toLowerCase() === 'grpc-timeout');
  const value = fields[at + 1] ?? '';
  // The spec's form: 1 to 8 digits and a unit.
  expect(value).toMatch(/^\d{1,8}[HMSmun]$/);
  return Number(value.slice(0, -1)) * unitMs[value.slice(-1)]!;
}

it('a call that waits for its agent past its deadline gets DEADLINE_EXCEEDED at its deadline, and never reaches the agent', async () => {
  const session = h2c(port);
  const sent = performance.now();
  const answer = await h2Request(session, call('late', '300m'), { body: [Buffer.alloc(5)] });
  const elapsed = performance.now() - sent;
  session.close();
  expect(answer.headers['grpc-status']).toBe('4');
  expect(answer.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_RESPONSE_TIMEOUT');
  expect(decodeURIComponent(String(answer.headers['grpc-message']))).toMatch(
    /deadline \(grpc-timeout, 300 ms\) passed while it waited for its agent/,
  );
  // Never before its deadline; at it, not at the end of the wait for the agent (generous: a noisy machine).
  expect(elapsed).toBeGreaterThanOrEqual(300);
  expect(elapsed).toBeLessThan(RECONNECT_WAIT_MS / 2);
  await until(() => edge.startup.waiting === 0);
  // The agent comes now: the expired call is not sent to it, a new one is.
  const received = await okAgent('late');
  const again = h2c(port);
  const ok = await h2Request(again, call('late'), { body: [Buffer.alloc(5)] });
  again.close();
  expect(ok.headers['grpc-status']).toBe('0');
  expect(received.length).toBe(1);
  expect(received[0]?.headers.map((f) => f.toLowerCase())).not.toContain('grpc-timeout');
});

it('a call that waited part of its deadline reaches the agent with a grpc-timeout no larger than what was left', async () => {
  const session = h2c(port);
  const answering = h2Request(session, call('later', '5S'), { body: [Buffer.alloc(5)] });
  // The call is at the edge, waiting for its agent, from here on at the latest.
  await until(() => edge.startup.waiting === 1);
  const waitingSince = performance.now();
  await delay(400); // the wait being measured
  const agentAt = performance.now();
  const received = await okAgent('later');
  const answer = await answering;
  session.close();
  expect(answer.headers['grpc-status']).toBe('0');
  expect(received.length).toBe(1);
  const left = grpcTimeoutOf(received[0]);
  expect(left).toBeGreaterThan(0);
  expect(left).toBeLessThanOrEqual(5_000 - (agentAt - waitingSince));
});

it('a call that did not wait keeps (about) its whole deadline, never more', async () => {
  const received = await okAgent('prompt');
  const session = h2c(port);
  const answer = await h2Request(session, call('prompt', '2S'), { body: [Buffer.alloc(5)] });
  session.close();
  expect(answer.headers['grpc-status']).toBe('0');
  const left = grpcTimeoutOf(received[0]);
  expect(left).toBeLessThanOrEqual(2_000);
  expect(left).toBeGreaterThan(1_000);
});

describe('a call that arrives at another node than its agent', () => {
  let a: Edge;
  let b: Edge;
  let portA: number;
  const key = 'agent-key-of-the-far-tunnel';

  beforeAll(async () => {
    ({ a, b, portA } = await twoNodes({ a: { reconnectWaitMs: RECONNECT_WAIT_MS } }));
    // The agent connects to B, then drops: its name stays reserved for it, and a call for it at A waits.
    await okAgent('far', b, key);
    closers.pop()?.();
    await until(() => b.sessions.get('far') === undefined);
  });

  afterAll(async () => {
    await a?.close(0);
    await b?.close(0);
  });

  const farCall = (timeout: string) => ({ ...call('far', timeout), ':authority': `far.localhost:${portA}` });

  it('waits for its agent at most until its deadline: DEADLINE_EXCEEDED at it', async () => {
    const session = h2c(portA);
    const sent = performance.now();
    const answer = await h2Request(session, farCall('300m'), { body: [Buffer.alloc(5)] });
    const elapsed = performance.now() - sent;
    session.close();
    expect(answer.headers['grpc-status']).toBe('4');
    expect(decodeURIComponent(String(answer.headers['grpc-message']))).toMatch(
      /deadline \(grpc-timeout, 300 ms\) passed while it waited for/,
    );
    expect(elapsed).toBeGreaterThanOrEqual(300);
    expect(elapsed).toBeLessThan(RECONNECT_WAIT_MS / 2);
    await until(() => a.inFlight === 0);
  });

  it('reaches the agent on the other node over the link with the time left since its arrival at the first', async () => {
    const session = h2c(portA);
    const answering = h2Request(session, farCall('5S'), { body: [Buffer.alloc(5)] });
    // Waiting at A for the agent (counted in flight there) from here on at the latest.
    await until(() => a.inFlight > 0);
    const waitingSince = performance.now();
    await delay(400); // the wait being measured
    const agentAt = performance.now();
    const received = await okAgent('far', b, key);
    const answer = await answering;
    session.close();
    expect(answer.headers['grpc-status']).toBe('0');
    expect(answer.headers['x-tunnel2-node']).toBe('node-b');
    expect(received.length).toBe(1);
    const left = grpcTimeoutOf(received[0]);
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(5_000 - (agentAt - waitingSince));
  });
});

describe('a call that waits for a free stream (its tunnel at its limit of requests at once)', () => {
  let narrow: Edge;
  let narrowPort: number;
  const received: string[] = [];
  const grpcTimeouts: number[] = [];
  let release: () => void = () => {};

  beforeAll(async () => {
    narrow = buildEdge({ port: 0, logger: silent, maxStreamsPerSession: 1, streamWaitMs: RECONNECT_WAIT_MS });
    ({ port: narrowPort } = await narrow.listen());
    closers.push(
      await hostileAgent(
        narrow.url,
        'narrow',
        (stream, request) => {
          received.push(request.target);
          const ok = () =>
            stream.sendHeaders(
              responseHead(200, ['content-type', 'application/grpc', 'grpc-status', '0']),
              true,
            );
          if (request.target !== '/svc/Hold') {
            grpcTimeouts.push(grpcTimeoutOf(request));
            ok();
            return;
          }
          release = ok;
        },
        { http2: true },
      ),
    );
  });

  afterAll(async () => {
    await narrow?.close(0);
  });

  const narrowCall = (path: string, timeout?: string) => ({
    ...call('narrow', timeout),
    ':path': path,
    ':authority': `narrow.localhost:${narrowPort}`,
  });
  const waiting = () => narrow.sessions.get('narrow')?.slots.waiting ?? 0;

  it('past its deadline: DEADLINE_EXCEEDED at it, naming the wait, never sent', async () => {
    const session = h2c(narrowPort);
    const held = h2Request(session, narrowCall('/svc/Hold'), { body: [Buffer.alloc(5)] });
    await until(() => received.includes('/svc/Hold'));
    const sent = performance.now();
    const answer = await h2Request(session, narrowCall('/svc/Late', '300m'), { body: [Buffer.alloc(5)] });
    const elapsed = performance.now() - sent;
    expect(answer.headers['grpc-status']).toBe('4');
    expect(decodeURIComponent(String(answer.headers['grpc-message']))).toMatch(
      /passed while it waited for a free stream to its agent/,
    );
    expect(elapsed).toBeGreaterThanOrEqual(300);
    expect(elapsed).toBeLessThan(RECONNECT_WAIT_MS / 2);
    await until(() => waiting() === 0);
    release();
    expect((await held).headers['grpc-status']).toBe('0');
    session.close();
    expect(received).not.toContain('/svc/Late');
  });

  it('for part of its deadline: the agent is told the time left when the stream opened', async () => {
    const holds = () => received.filter((t) => t === '/svc/Hold').length;
    const before = holds();
    const session = h2c(narrowPort);
    const held = h2Request(session, narrowCall('/svc/Hold'), { body: [Buffer.alloc(5)] });
    await until(() => holds() === before + 1);
    const answering = h2Request(session, narrowCall('/svc/Later', '5S'), { body: [Buffer.alloc(5)] });
    await until(() => waiting() === 1);
    const waitingSince = performance.now();
    await delay(400); // the wait being measured
    const releasedAt = performance.now();
    release();
    expect((await held).headers['grpc-status']).toBe('0');
    expect((await answering).headers['grpc-status']).toBe('0');
    session.close();
    const left = grpcTimeouts.at(-1) ?? Number.NaN;
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(5_000 - (releasedAt - waitingSince));
  });
});

describe('a call that waits for a free stream on the node holding its agent', () => {
  let a: Edge;
  let b: Edge;
  let portA: number;
  const grpcTimeouts: number[] = [];
  let release: () => void = () => {};
  let held = 0;

  beforeAll(async () => {
    ({ a, b, portA } = await twoNodes({
      b: { maxStreamsPerSession: 1, streamWaitMs: RECONNECT_WAIT_MS },
    }));
    closers.push(
      await hostileAgent(
        b.url,
        'slim',
        (stream, request) => {
          const ok = () =>
            stream.sendHeaders(
              responseHead(200, ['content-type', 'application/grpc', 'grpc-status', '0']),
              true,
            );
          if (request.target === '/svc/Hold') {
            held++;
            release = ok;
            return;
          }
          grpcTimeouts.push(grpcTimeoutOf(request));
          ok();
        },
        { http2: true },
      ),
    );
  });

  afterAll(async () => {
    await a?.close(0);
    await b?.close(0);
  });

  const slimCall = (path: string, timeout?: string) => ({
    ...call('slim', timeout),
    ':path': path,
    ':authority': `slim.localhost:${portA}`,
  });

  it("the serving node's agent is told the time left when the stream opened there", async () => {
    const session = h2c(portA);
    const holding = h2Request(session, slimCall('/svc/Hold'), { body: [Buffer.alloc(5)] });
    await until(() => held === 1);
    const answering = h2Request(session, slimCall('/svc/Later', '5S'), { body: [Buffer.alloc(5)] });
    await until(() => b.sessions.get('slim')?.slots.waiting === 1);
    const waitingSince = performance.now();
    await delay(400); // the wait being measured
    const releasedAt = performance.now();
    release();
    expect((await holding).headers['grpc-status']).toBe('0');
    const answer = await answering;
    session.close();
    expect(answer.headers['grpc-status']).toBe('0');
    expect(answer.headers['x-tunnel2-node']).toBe('node-b');
    const left = grpcTimeouts.at(-1) ?? Number.NaN;
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(5_000 - (releasedAt - waitingSince));
  });
});

describe('a call a replica refused, sent to another that is at its limit of requests at once', () => {
  let replicas: Edge;
  let replicasPort: number;
  let refused = 0;
  let release: () => void = () => {};
  const received: string[] = [];
  const asReplica = { query: '&replica=1', headers: { authorization: 'Bearer token-r' } };

  beforeAll(async () => {
    replicas = buildEdge({
      port: 0,
      logger: silent,
      auth: { tokens: ['token-r'] },
      maxStreamsPerSession: 1,
      streamWaitMs: RECONNECT_WAIT_MS,
    });
    ({ port: replicasPort } = await replicas.listen());
    // The replica that runs calls: it holds /svc/Hold (its one stream slot) until released.
    closers.push(
      await hostileAgent(
        replicas.url,
        'dup',
        (stream, request) => {
          received.push(request.target);
          const ok = () =>
            stream.sendHeaders(
              responseHead(200, ['content-type', 'application/grpc', 'grpc-status', '0']),
              true,
            );
          if (request.target === '/svc/Hold') release = ok;
          else ok();
        },
        { http2: true },
        asReplica,
      ),
    );
  });

  afterAll(async () => {
    await replicas?.close(0);
  });

  const dupCall = (path: string, timeout?: string) => ({
    ...call('dup', timeout),
    ':path': path,
    ':authority': `dup.localhost:${replicasPort}`,
  });

  it('waits for the slot under its deadline: DEADLINE_EXCEEDED at it, never sent', async () => {
    const session = h2c(replicasPort);
    const holding = h2Request(session, dupCall('/svc/Hold'), { body: [Buffer.alloc(5)] });
    await until(() => received.includes('/svc/Hold'));
    // A second replica, idle (so chosen first), that refuses every stream before running it.
    closers.push(
      await hostileAgent(
        replicas.url,
        'dup',
        (stream) => {
          refused++;
          stream.reset(ErrorCode.REFUSED_STREAM);
        },
        { http2: true },
        asReplica,
      ),
    );
    await until(() => replicas.sessions.replicas('dup').length === 2);
    const sent = performance.now();
    // Bodiless: a request with a body is never sent to another replica.
    const answer = await h2Request(session, dupCall('/svc/Late', '300m'));
    const elapsed = performance.now() - sent;
    expect(refused).toBe(1);
    expect(answer.headers['grpc-status']).toBe('4');
    expect(decodeURIComponent(String(answer.headers['grpc-message']))).toMatch(
      /passed while it waited for a free stream to its agent/,
    );
    expect(elapsed).toBeGreaterThanOrEqual(300);
    expect(elapsed).toBeLessThan(RECONNECT_WAIT_MS / 2);
    release();
    expect((await holding).headers['grpc-status']).toBe('0');
    session.close();
    expect(received).not.toContain('/svc/Late');
  });
});
