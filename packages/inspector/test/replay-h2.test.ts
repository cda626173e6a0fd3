import { once } from 'node:events';
import {
  connect,
  createServer,
  type Http2Server,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ExchangeRecorder } from '../src/capture/capture.js';
import { EntryStore } from '../src/capture/entry-store.js';
import { sendOverH2 } from '../src/capture/replay-h2.js';

// The HTTP/2 half of a replay (replay-h2.ts) is bounded by the target: one that never answers, or stops
// mid-body, ends the replay after the idle timeout with the stream cancelled, and the entry says why.

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function target(onStream: (stream: ServerHttp2Stream) => void): Promise<number> {
  const sessions = new Set<ServerHttp2Session>();
  const server: Http2Server = createServer();
  server.on('session', (session) => sessions.add(session));
  server.on('stream', onStream);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(async () => {
    const closed = once(server, 'close');
    server.close();
    for (const session of sessions) session.destroy();
    await closed;
  });
  return (server.address() as AddressInfo).port;
}

async function replayTo(port: number, idleTimeoutMs: number) {
  const session = connect(`http://127.0.0.1:${port}`);
  cleanups.push(() => session.destroy());
  const store = new EntryStore();
  const recorder = new ExchangeRecorder(store, { method: 'POST', target: '/', headers: [] }, 1_000);
  const stream = session.request({ ':method': 'POST', ':path': '/' }, { endStream: false });
  const cancelled = new Promise<number>((resolve) =>
    stream.once('close', () => resolve(stream.rstCode ?? 0)),
  );
  const failure = await sendOverH2(
    stream,
    Buffer.from('body'),
    recorder,
    new AbortController().signal,
    idleTimeoutMs,
  );
  const entry = store.get(recorder.finish(failure)!)!;
  return { failure, entry, rstCode: await cancelled };
}

describe('a replay over HTTP/2', () => {
  it('to a target that never answers ends after the idle timeout, its stream cancelled', async () => {
    let seen = 0;
    const port = await target(() => {
      seen++;
    });
    const { failure, entry, rstCode } = await replayTo(port, 200);
    expect(seen).toBe(1);
    expect(failure).toMatchObject({ code: 'replay_timeout' });
    expect(entry.error).toMatchObject({ code: 'replay_timeout' });
    expect(rstCode).toBe(0x8);
  });

  it('to a target that stops mid-body ends too, with the part received kept', async () => {
    const port = await target((stream) => {
      stream.respond({ ':status': 200 });
      stream.write('part');
    });
    const { failure, entry } = await replayTo(port, 200);
    expect(failure).toMatchObject({ code: 'replay_timeout' });
    expect(entry.status).toBe(200);
    expect(entry.response.bytes().toString()).toBe('part');
  });

  it("keeps the target's trailers with the entry", async () => {
    const port = await target((stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'grpc-message': 'ok' }));
      stream.end('x');
    });
    const { failure, entry } = await replayTo(port, 5_000);
    expect(failure).toBeUndefined();
    expect(entry.responseTrailers).toEqual(['grpc-status', '0', 'grpc-message', 'ok']);
  });
});
