// gRPC through the tunnel with a server and a client nobody here wrote (@grpc/grpc-js): every kind of call,
// metadata and trailers, errors, cancellation, deadlines, keepalive and a 64 MiB stream, through a real edge
// and a real agent process (`tunnel2 http <port> --h2c`), once over h2c with prior knowledge on the plain
// port and once over the TLS port (ALPN h2). The service is @tunnel2/test-backend/grpc.

import { createHash } from 'node:crypto';
import { type connectivityState, Metadata, status } from '@grpc/grpc-js';
import { deterministicChunks, deterministicSha256 } from '@tunnel2/test-backend';
import { type ChatMessage, startGrpcTestServer } from '@tunnel2/test-backend/grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type EdgeCertificates,
  type GrpcStack,
  makeEdgeCertificates,
  startAgent,
  startGrpcStack,
  stop,
  type Transport,
} from './support/grpc-stack.js';
import { currentRss, peakRss } from './support/processes.js';

const MiB = 1024 * 1024;

let tls: EdgeCertificates;
beforeAll(async () => {
  tls = await makeEdgeCertificates();
});
afterAll(() => tls.dispose());

describe.each<Transport>(['h2c', 'tls'])('gRPC through the tunnel over %s', (transport) => {
  let stack: GrpcStack;
  beforeAll(async () => {
    stack = await startGrpcStack(transport, tls);
  });
  afterAll(() => stack?.close());

  it('unary: the reply, and x-echo-* metadata (text and -bin) both ways, in headers and in trailers', async () => {
    const client = stack.client();
    const metadata = new Metadata();
    metadata.set('x-echo-text', 'hello tunnel');
    metadata.set('x-echo-blob-bin', Buffer.from([0, 1, 2, 0xfe, 0xff, 0x0d, 0x0a]));
    const payload = Buffer.from(Array.from({ length: 1000 }, (_, i) => i & 0xff));
    const {
      reply,
      error,
      headers,
      status: final,
    } = await client.unary('Echo', { message: 'ping', payload }, { metadata }).outcome;
    expect(error).toBeUndefined();
    expect(reply?.message).toBe('ping');
    expect(reply?.payload.equals(payload)).toBe(true);
    expect(headers?.get('x-echo-text')).toEqual(['hello tunnel']);
    expect(headers?.get('x-echo-blob-bin')).toEqual([Buffer.from([0, 1, 2, 0xfe, 0xff, 0x0d, 0x0a])]);
    expect(final.code).toBe(status.OK);
    expect(final.metadata.get('x-echo-text')).toEqual(['hello tunnel']);
    expect(final.metadata.get('x-echo-blob-bin')).toEqual([Buffer.from([0, 1, 2, 0xfe, 0xff, 0x0d, 0x0a])]);
  });

  it('server streaming, client streaming and bidirectional calls', async () => {
    const client = stack.client();
    const indexes: number[] = [];
    for await (const reply of client.serverStream('Count', { count: 200 })) indexes.push(reply.index);
    expect(indexes).toEqual(Array.from({ length: 200 }, (_, i) => i));

    const sum = client.clientStream('Sum');
    for (let value = 1; value <= 300; value++) sum.call.write({ value });
    sum.call.end();
    const summed = await sum.outcome;
    expect(summed.error).toBeUndefined();
    expect(summed.reply).toEqual({ sum: (300 * 301) / 2, count: 300 });

    // Bidirectional in lock step: each answer arrives before the next message is sent, so the stream is
    // really interactive through the tunnel (nothing waits for the request's end).
    const chat = client.bidi();
    const answers: string[] = [];
    for (let i = 0; i < 20; i++) {
      const answer = new Promise<string>((resolve) => chat.once('data', (m: ChatMessage) => resolve(m.text)));
      chat.write({ text: `message ${i}` });
      answers.push(await answer);
    }
    chat.end();
    await new Promise((resolve) => chat.on('status', resolve));
    expect(answers).toEqual(Array.from({ length: 20 }, (_, i) => `echo: message ${i}`));
  });

  it('1,000 concurrent unary calls on one channel all succeed with their own answers', async () => {
    const client = stack.client();
    const calls = Array.from(
      { length: 1000 },
      (_, i) => client.unary('Echo', { message: `call ${i}` }).outcome,
    );
    const outcomes = await Promise.all(calls);
    const failed = outcomes
      .filter((o) => o.error !== undefined)
      .map((o) => `${o.status.code} ${o.status.details}`);
    expect(failed).toEqual([]);
    expect(outcomes.map((o) => o.reply?.message)).toEqual(
      Array.from({ length: 1000 }, (_, i) => `call ${i}`),
    );
  }, 120_000);

  it('64 MiB streamed each way arrives intact, and neither edge nor agent holds it in memory', async () => {
    const size = 64 * MiB;
    const client = stack.client();
    const pids = { edge: stack.edge.child.pid!, agent: stack.agent.child.pid! };
    const before = { edge: currentRss(pids.edge), agent: currentRss(pids.agent) };

    // Download read slowly: a pause every 8 MiB long enough for every window upstream to fill.
    const hash = createHash('sha256');
    let received = 0;
    await new Promise<void>((resolve, reject) => {
      const stream = client.serverStream('Download', { size, chunkSize: 32 * 1024 });
      let sincePause = 0;
      stream.on('data', (chunk: { data: Buffer }) => {
        hash.update(chunk.data);
        received += chunk.data.length;
        sincePause += chunk.data.length;
        if (sincePause >= 8 * MiB) {
          sincePause = 0;
          stream.pause();
          setTimeout(() => stream.resume(), 50);
        }
      });
      stream.on('end', resolve);
      stream.on('error', reject);
    });
    expect(received).toBe(size);
    expect(hash.digest('hex')).toBe(deterministicSha256(size));

    // Upload honouring the call's backpressure.
    const upload = client.clientStream('Upload');
    for (const chunk of deterministicChunks(size)) {
      if (!upload.call.write({ data: chunk }))
        await new Promise((resolve) => upload.call.once('drain', resolve));
    }
    upload.call.end();
    const uploaded = await upload.outcome;
    expect(uploaded.error).toBeUndefined();
    expect(uploaded.reply).toEqual({ bytes: size, sha256: deterministicSha256(size) });

    const growth = { edge: peakRss(pids.edge) - before.edge, agent: peakRss(pids.agent) - before.agent };
    console.log(
      `${transport}: peak RSS growth over 64 MiB each way: edge ${(growth.edge / MiB).toFixed(1)} MiB, ` +
        `agent ${(growth.agent / MiB).toFixed(1)} MiB`,
    );
    // Generous (GC timing varies: 5-9 MiB seen), yet half the message: a side that buffered much of the
    // stream instead of holding its sender back would exceed it.
    expect(growth.edge).toBeLessThan(size / 2);
    expect(growth.agent).toBeLessThan(size / 2);
  }, 180_000);

  it('a call the client cancels is cancelled at the backend', async () => {
    const client = stack.client();
    const tag = `cancel-${transport}`;
    const started = stack.server.nextCall('Wait', tag);
    const { call, outcome } = client.unary('Wait', { tag });
    await started;
    const cancelled = stack.server.nextCancel('Wait', tag);
    call.cancel();
    await cancelled;
    expect((await outcome).status.code).toBe(status.CANCELLED);
  });

  it('a deadline: the client gets DEADLINE_EXCEEDED and the backend sees the call cancelled', async () => {
    const client = stack.client();
    const tag = `deadline-${transport}`;
    const cancelled = stack.server.nextCancel('Wait', tag);
    const { outcome } = client.unary('Wait', { tag }, { options: { deadline: Date.now() + 1_000 } });
    const { status: final } = await outcome;
    expect(final.code).toBe(status.DEADLINE_EXCEEDED);
    await cancelled;
  });

  it("an error status passes through with its message and the trailers' -bin metadata", async () => {
    const client = stack.client();
    const message = 'no such thing: 100% gone, naïve \u{1F600}';
    const detail = Buffer.from([0xde, 0xad, 0x00, 0xbe, 0xef]);
    const { error, status: final } = await client.unary('Fail', { code: status.NOT_FOUND, message, detail })
      .outcome;
    expect(error?.code).toBe(status.NOT_FOUND);
    expect(final.details).toBe(message);
    expect(final.metadata.get('x-detail-bin')).toEqual([detail]);
  });

  it("a backend that is down: UNAVAILABLE (14) with the tunnel's message, not an HTTP error page", async () => {
    // An agent whose h2c target refuses connections: the port the gRPC server had before it closed.
    const gone = await startGrpcTestServer();
    const deadPort = gone.port;
    await gone.close();
    const agent = await startAgent(deadPort, stack.url, `down-${transport}`, {
      ca: transport === 'tls' ? tls.ca.file : undefined,
    });
    try {
      const client = stack.client({}, `down-${transport}`);
      const { error, status: final } = await client.unary('Echo', { message: 'anyone?' }).outcome;
      expect(error?.code, final.details).toBe(status.UNAVAILABLE);
      expect(final.details).toMatch(/\S/);
      expect(final.metadata.get('x-tunnel2-error')).toEqual(['TUNNEL2_ERR_BACKEND_UNREACHABLE']);
      // The answered call is over on the agent's side too: stopping has nothing left to finish (a tunnel
      // stream whose request body was never consumed stayed open, and Ctrl-C waited its 5 s for it).
      await stop(agent);
      expect(agent.events.filter((e) => e.event === 'finishing')).toEqual([]);
    } finally {
      await stop(agent);
    }
  });

  it("the tunnel's public rules apply to calls: --basic-auth and --allow-ip", async () => {
    const ca = transport === 'tls' ? tls.ca.file : undefined;
    const guarded = await startAgent(stack.server.port, stack.url, `auth-${transport}`, {
      ca,
      args: ['--basic-auth', 'alice:s3cret'],
    });
    const fenced = await startAgent(stack.server.port, stack.url, `ip-${transport}`, {
      ca,
      args: ['--allow-ip', '192.0.2.0/24'],
    });
    try {
      const client = stack.client({}, `auth-${transport}`);
      const refused = await client.unary('Echo', { message: 'x' }).outcome;
      expect(refused.status.code, refused.status.details).toBe(status.UNAUTHENTICATED);
      // The edge's own answer in the gRPC form: its code and its words, not grpc-js's "HTTP status 401".
      expect(refused.status.metadata.get('x-tunnel2-error')).toEqual(['TUNNEL2_ERR_PUBLIC_AUTH_REQUIRED']);
      expect(refused.status.details).not.toMatch(/HTTP status code/);
      const metadata = new Metadata();
      metadata.set('authorization', `Basic ${Buffer.from('alice:s3cret').toString('base64')}`);
      const allowed = await client.unary('Echo', { message: 'with credentials' }, { metadata }).outcome;
      expect(allowed.reply?.message).toBe('with credentials');

      const outside = await stack.client({}, `ip-${transport}`).unary('Echo', { message: 'x' }).outcome;
      expect(outside.status.code, outside.status.details).toBe(status.PERMISSION_DENIED);
      expect(outside.status.metadata.get('x-tunnel2-error')).toEqual(['TUNNEL2_ERR_PUBLIC_IP_FORBIDDEN']);
    } finally {
      await stop(guarded);
      await stop(fenced);
    }
  });

  it('keepalive pings every second for 5 s during a quiet call are not taken for a flood', async () => {
    const client = stack.client({
      'grpc.keepalive_time_ms': 1_000,
      'grpc.keepalive_timeout_ms': 5_000,
      'grpc.keepalive_permit_without_calls': 1,
    });
    // An open call keeps the connection from being idle (an idle HTTP/2 connection is closed at the edge's
    // keepAliveTimeoutMs, as nginx's keepalive_timeout does): only the pings could end it.
    const chat = client.bidi();
    const next = (): Promise<string> =>
      new Promise((resolve) => chat.once('data', (m: ChatMessage) => resolve(m.text)));
    let answer = next();
    chat.write({ text: 'before' });
    expect(await answer).toBe('echo: before');
    const channel = client.client.getChannel();
    const states: connectivityState[] = [];
    let watching = true;
    const watch = (): void => {
      channel.watchConnectivityState(channel.getConnectivityState(false), Date.now() + 60_000, () => {
        if (!watching) return;
        states.push(channel.getConnectivityState(false));
        watch();
      });
    };
    watch();
    // Time is what this test is about: five keepalive intervals must pass on the quiet call.
    await new Promise((resolve) => setTimeout(resolve, 5_500));
    watching = false;
    expect(states, 'the connection was dropped (a GOAWAY for too many pings?)').toEqual([]);
    answer = next();
    chat.write({ text: 'after' });
    expect(await answer).toBe('echo: after');
    const ended = new Promise<{ code: number }>((resolve) => chat.on('status', resolve));
    chat.end();
    expect((await ended).code).toBe(status.OK);
  }, 30_000);
});
