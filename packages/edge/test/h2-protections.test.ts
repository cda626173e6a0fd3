import { connect as h2connect } from 'node:http2';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEdge, type Edge } from '../src/build-edge.js';
import { createEdgeMetrics } from '../src/operations/metrics.js';
import {
  Flag,
  FrameType,
  frame,
  indexed,
  indexedLiteral,
  literal,
  RawH2,
  requestBlock,
} from './support/h2-frames.js';

// HTTP/2's own protections on the edge's public port, each attacked by a client written here (raw frames
// over a socket), while a well-behaved client on another connection is served before and after.

const H2_ENHANCE_YOUR_CALM = 0xb;
const H2_PROTOCOL_ERROR = 0x1;

let edge: Edge;
let port: number;

beforeAll(async () => {
  edge = buildEdge({ port: 0, logger: pino({ level: 'silent' }), keepAliveTimeoutMs: 60_000 });
  ({ port } = await edge.listen());
});

afterAll(async () => {
  await edge.close(0);
});

/** A correct client's request on its own connection: the edge's 404 for an unknown tunnel. */
async function wellBehaved(): Promise<number> {
  const session = h2connect(`http://127.0.0.1:${port}`);
  session.on('error', () => {});
  try {
    const stream = session.request({ ':path': '/', ':authority': `nobody.localhost:${port}` });
    stream.on('error', () => {});
    const status = await new Promise<number>((resolve, reject) => {
      stream.once('response', (headers) => resolve(Number(headers[':status'])));
      stream.once('close', () => reject(new Error('no response')));
    });
    stream.resume();
    return status;
  } finally {
    session.close();
  }
}

describe('HTTP/2 protections on the public port', () => {
  it('a stream past maxConcurrentStreams (100) once the setting is acknowledged: GOAWAY PROTOCOL_ERROR', async () => {
    const h2 = await startRaw();
    // 101 requests whose client never ends its side: nghttp2 takes the 101st, opened after the client
    // acknowledged the limit, as a connection error (RFC 9113 §5.1.2), not a stream to refuse.
    const block = requestBlock(`nobody.localhost:${port}`);
    for (let i = 0; i < 101; i++) h2.write(frame(FrameType.HEADERS, Flag.END_HEADERS, 1 + 2 * i, block));
    await h2.whenClosed();
    const goaway = h2.frames.find((f) => f.type === FrameType.GOAWAY);
    expect(goaway?.payload.readUInt32BE(0)).toBe(199);
    expect(h2.goawayCode()).toBe(H2_PROTOCOL_ERROR);
    expect(goaway?.payload.subarray(8).toString()).toMatch(/max concurrent streams/);
    expect(await wellBehaved()).toBe(404);
  });

  it('rapid reset (CVE-2023-44487): GOAWAY and the connection closed; others are served', async () => {
    const h2 = await startRaw();
    const block = requestBlock(`nobody.localhost:${port}`);
    const rst = Buffer.alloc(4);
    rst.writeUInt32BE(0x8);
    let id = 1;
    while (!h2.closed && id < 20_000) {
      const batch: Buffer[] = [];
      for (let i = 0; i < 100; i++, id += 2) {
        batch.push(
          frame(FrameType.HEADERS, Flag.END_HEADERS, id, block),
          frame(FrameType.RST_STREAM, 0, id, rst),
        );
      }
      h2.write(Buffer.concat(batch));
      await new Promise((resolve) => setImmediate(resolve));
    }
    await h2.whenClosed();
    expect(h2.goawayCode()).toBeDefined();
    expect(id).toBeLessThan(20_000);
    expect(await wellBehaved()).toBe(404);
  });

  it('CONTINUATION flood: a header block that never ends closes the connection', async () => {
    const h2 = await startRaw();
    h2.write(frame(FrameType.HEADERS, 0, 1, literal(':method', 'GET')));
    const piece = frame(FrameType.CONTINUATION, 0, 1, literal('x-flood', 'a'.repeat(100)));
    let sent = 0;
    while (!h2.closed && sent < 100_000) {
      h2.write(Buffer.concat(Array.from({ length: 100 }, () => piece)));
      sent += 100;
      await new Promise((resolve) => setImmediate(resolve));
    }
    await h2.whenClosed();
    expect(sent).toBeLessThan(100_000);
    expect(await wellBehaved()).toBe(404);
  });

  it('CONTINUATION flood of empty frames closes the connection too', async () => {
    const h2 = await startRaw();
    h2.write(frame(FrameType.HEADERS, 0, 1, literal(':method', 'GET')));
    const piece = frame(FrameType.CONTINUATION, 0, 1);
    let sent = 0;
    while (!h2.closed && sent < 1_000_000) {
      h2.write(Buffer.concat(Array.from({ length: 1000 }, () => piece)));
      sent += 1000;
      await new Promise((resolve) => setImmediate(resolve));
    }
    await h2.whenClosed();
    expect(sent).toBeLessThan(1_000_000);
  });

  it('SETTINGS flood from a client that reads nothing: closed with ENHANCE_YOUR_CALM', async () => {
    const h2 = await startRaw();
    h2.socket.pause();
    const settings = frame(FrameType.SETTINGS, 0, 0);
    let sent = 0;
    while (!h2.closed && sent < 200_000) {
      h2.write(Buffer.concat(Array.from({ length: 1000 }, () => settings)));
      sent += 1000;
      await new Promise((resolve) => setImmediate(resolve));
      if (sent % 20_000 === 0) h2.socket.resume();
    }
    h2.socket.resume();
    await h2.whenClosed();
    expect(sent).toBeLessThan(200_000);
    // The GOAWAY is written to a client that reads nothing: it may be lost with the connection.
    expect([undefined, H2_ENHANCE_YOUR_CALM]).toContain(h2.goawayCode());
    expect(await wellBehaved()).toBe(404);
  });

  it('PING flood from a client that reads nothing: closed with ENHANCE_YOUR_CALM', async () => {
    const h2 = await startRaw();
    h2.socket.pause();
    const ping = frame(FrameType.PING, 0, 0, Buffer.alloc(8));
    let sent = 0;
    while (!h2.closed && sent < 200_000) {
      h2.write(Buffer.concat(Array.from({ length: 1000 }, () => ping)));
      sent += 1000;
      await new Promise((resolve) => setImmediate(resolve));
      if (sent % 20_000 === 0) h2.socket.resume();
    }
    h2.socket.resume();
    await h2.whenClosed();
    expect(sent).toBeLessThan(200_000);
    // The GOAWAY is written to a client that reads nothing: it may be lost with the connection.
    expect([undefined, H2_ENHANCE_YOUR_CALM]).toContain(h2.goawayCode());
    expect(await wellBehaved()).toBe(404);
  });

  it('keep-alive PINGs as a gRPC client sends them are answered and never close the connection', async () => {
    const h2 = await startRaw();
    for (let i = 0; i < 20; i++) {
      const data = Buffer.alloc(8);
      data.writeUInt32BE(i + 1);
      h2.write(frame(FrameType.PING, 0, 0, data));
      const ack = await h2.until(
        (f) => f.type === FrameType.PING && (f.flags & Flag.ACK) !== 0 && f.payload.readUInt32BE(0) === i + 1,
      );
      expect(ack).toBeDefined();
    }
    expect(h2.closed).toBe(false);
    expect(h2.goawayCode()).toBeUndefined();
    h2.destroy();
  });

  it('HPACK bomb: a small block decoding past maxHeaderListSize: the stream refused, the connection serves on', async () => {
    const h2 = await startRaw();
    // One 3 KB field enters the dynamic table (4 KiB), then 1-byte references to it repeat it: 30 bytes on the
    // wire decode to 90 KB, against the edge's 16 KiB (maxHeaderBytes).
    const block = Buffer.concat([
      requestBlock(`nobody.localhost:${port}`),
      indexedLiteral('x-bomb', 'b'.repeat(3000)),
      ...Array.from({ length: 30 }, () => indexed(62)),
    ]);
    h2.write(frame(FrameType.HEADERS, Flag.END_HEADERS | Flag.END_STREAM, 1, block));
    const reaction = await h2.until((f) => f.streamId === 1 || f.type === FrameType.GOAWAY);
    // nghttp2 refuses the stream (RST_STREAM ENHANCE_YOUR_CALM) without the decoded list ever being held.
    expect(reaction?.type).toBe(FrameType.RST_STREAM);
    expect(reaction?.payload.readUInt32BE(0)).toBe(H2_ENHANCE_YOUR_CALM);
    // The connection serves on: the next request on it is answered.
    h2.write(
      frame(
        FrameType.HEADERS,
        Flag.END_HEADERS | Flag.END_STREAM,
        3,
        requestBlock(`nobody.localhost:${port}`),
      ),
    );
    const next = await h2.until((f) => f.type === FrameType.HEADERS && f.streamId === 3);
    expect(next).toBeDefined();
    expect(await wellBehaved()).toBe(404);
    h2.destroy();
  });
});

describe('HTTP/2 requests and connections are counted as HTTP/1.1 ones', () => {
  it('metrics count its requests by class and its refusals by code', async () => {
    const metrics = createEdgeMetrics(edge, 'test');
    try {
      const before = await metrics.requestTotals();
      expect(await wellBehaved()).toBe(404);
      // Counted when the server's stream closes, which may follow the client's read of the answer.
      let after = await metrics.requestTotals();
      for (let i = 0; i < 100 && (after['4xx'] ?? 0) === (before['4xx'] ?? 0); i++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
        after = await metrics.requestTotals();
      }
      expect((after['4xx'] ?? 0) - (before['4xx'] ?? 0)).toBe(1);
      const { body } = await metrics.render();
      expect(body).toMatch(/reason="unknown_session"[^\n]* [1-9]/);
    } finally {
      metrics.close();
    }
  });

  it('maxConnectionsPerAddress applies to HTTP/2 connections', async () => {
    const capped = buildEdge({ port: 0, logger: pino({ level: 'silent' }), maxConnectionsPerAddress: 1 });
    const { port: cappedPort } = await capped.listen();
    try {
      const first = new RawH2(cappedPort);
      await first.start();
      const second = new RawH2(cappedPort);
      await second.opened;
      await second.whenClosed();
      expect(second.frames).toEqual([]);
      expect(first.closed).toBe(false);
      expect(capped.publicConnections.dropped.per_address).toBe(1);
      first.destroy();
    } finally {
      await capped.close(0);
    }
  });
});

describe('HTTP/2 connections over time', () => {
  it('an idle connection is closed with GOAWAY after the keep-alive timeout', async () => {
    const quick = buildEdge({ port: 0, logger: pino({ level: 'silent' }), keepAliveTimeoutMs: 200 });
    const { port: quickPort } = await quick.listen();
    try {
      const h2 = new RawH2(quickPort);
      await h2.start();
      await h2.whenClosed();
      expect(h2.goawayCode()).toBe(0);
    } finally {
      await quick.close(0);
    }
  });

  it('the drain sends GOAWAY and lets an open stream finish', async () => {
    const draining = buildEdge({ port: 0, logger: pino({ level: 'silent' }) });
    const { port: drainPort } = await draining.listen();
    const h2 = new RawH2(drainPort);
    await h2.start();
    const closing = draining.close(5_000);
    const goaway = await h2.until((f) => f.type === FrameType.GOAWAY);
    expect(goaway?.payload.readUInt32BE(4)).toBe(0);
    await closing;
    await h2.whenClosed();
  });
});

async function startRaw(): Promise<RawH2> {
  const h2 = new RawH2(port);
  await h2.start();
  return h2;
}
