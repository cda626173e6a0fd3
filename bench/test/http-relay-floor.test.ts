import { once } from 'node:events';
import { request } from 'node:http';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestBackend, type TestBackend } from '@tunnel2/test-backend';
import { afterEach, describe, expect, it } from 'vitest';
import { FrameKind, FrameReader, FrameWriter } from '../src/processes/http-relay-frames.js';
import { type ChildService, startChildService } from '../src/stacks/child-service.js';

// The HTTP floor of `pnpm bench floor`: its framing, and the two processes carrying real HTTP both ways.

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

const bin = join(
  fileURLToPath(new URL('.', import.meta.url)),
  '../dist/processes/http-relay-floor-process.js',
);

function listening(line: string): string | undefined {
  const parsed: unknown = JSON.parse(line);
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const url = (parsed as { url?: unknown }).url;
  return typeof url === 'string' ? url : undefined;
}

async function startPair(backendUrl: string): Promise<string> {
  const start = async (name: string, args: string[]): Promise<ChildService> => {
    const service = await startChildService({ name, args: [bin, ...args], ready: listening });
    cleanup.push(() => service.stop());
    return service;
  };
  const agent = await start('http relay agent', ['--role', 'agent', '--backend', backendUrl]);
  const edge = await start('http relay edge', ['--role', 'edge', '--upstream', agent.readyValue]);
  return edge.readyValue;
}

async function backend(): Promise<TestBackend> {
  const started = await createTestBackend();
  cleanup.push(() => started.close());
  return started;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** One request; `body` is written in two chunks so a request without a length goes out chunked. */
function exchange(url: string, method: string, body?: Buffer, length?: number): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers = length === undefined ? {} : { 'content-length': String(length) };
    const req = request(url, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    if (body === undefined) req.end();
    else {
      req.write(body.subarray(0, body.length >> 1));
      req.end(body.subarray(body.length >> 1));
    }
  });
}

describe('http relay frames', () => {
  it('come out of the reader as they went in, however the bytes are cut', async () => {
    const server = createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const accepted = once(server, 'connection') as Promise<[Socket]>;
    const client = connect((server.address() as AddressInfo).port, '127.0.0.1');
    const [peer] = await accepted;
    cleanup.push(async () => {
      client.destroy();
      peer.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
    const sent: [number, number, string][] = [
      [1, FrameKind.HEAD_END, '["GET","/",[]]'],
      [2, FrameKind.HEAD, '["POST","/x",["a","b"]]'],
      [2, FrameKind.DATA, 'body bytes'],
      [2, FrameKind.END, ''],
      [0xffffffff, FrameKind.RESET, ''],
    ];
    const writer = new FrameWriter(client);
    for (const [id, kind, text] of sent) writer.send(id, kind as FrameKind, Buffer.from(text));
    const received: Buffer[] = [];
    let total = 0;
    const wire = await new Promise<Buffer>((resolve) => {
      peer.on('data', (chunk: Buffer) => {
        received.push(chunk);
        total += chunk.length;
        if (total === 8 * sent.length + sent.reduce((n, [, , t]) => n + t.length, 0)) {
          resolve(Buffer.concat(received));
        }
      });
    });
    for (let cut = 0; cut <= wire.length; cut++) {
      const frames: [number, number, string][] = [];
      const reader = new FrameReader((id, kind, payload) => frames.push([id, kind, payload.toString()]));
      reader.push(wire.subarray(0, cut));
      reader.push(wire.subarray(cut));
      expect(frames).toEqual(sent);
    }
  });
});

describe('http relay floor process pair', () => {
  it('carries GETs, streamed bodies both ways (with a length and chunked) and the backend statuses', async () => {
    const target = await backend();
    const edge = await startPair(target.url);

    const get = await exchange(`${edge}/loadtest/get`, 'GET');
    expect(get.status).toBe(200);
    expect(JSON.parse(get.body.toString())).toMatchObject({ name: 'tunnel2 load-test item' });

    const body = Buffer.alloc(3 * 2 ** 20);
    for (let i = 0; i < body.length; i += 4) body.writeUInt32LE((i * 2654435761) >>> 0, i);
    const sized = await exchange(`${edge}/loadtest/echo`, 'POST', body, body.length);
    expect(sized.status).toBe(200);
    expect(sized.headers['content-length']).toBe(String(body.length));
    expect(sized.body.equals(body)).toBe(true);
    const chunked = await exchange(`${edge}/loadtest/echo`, 'POST', body);
    expect(chunked.status).toBe(200);
    expect(chunked.headers['transfer-encoding']).toBe('chunked');
    expect(chunked.body.equals(body)).toBe(true);

    expect((await exchange(`${edge}/status/404`, 'GET')).status).toBe(404);
  });

  it("cancels the backend's request when the client goes away, and answers 502 when the backend is down", async () => {
    const target = await backend();
    const edge = await startPair(target.url);
    const aborted = target.nextAbort('/stream/');
    const req = request(`${edge}/stream/1000?interval=20`);
    req.on('error', () => {});
    req.on('response', (res) => res.once('data', () => req.destroy()));
    req.end();
    expect(await aborted).toBe('/stream/1000?interval=20');

    const gone = await backend();
    const goneUrl = gone.url;
    await gone.close();
    const down = await startPair(goneUrl);
    expect((await exchange(`${down}/loadtest/get`, 'GET')).status).toBe(502);
  });
});
