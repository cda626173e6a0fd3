import { createHash } from 'node:crypto';
import { credentials, Metadata, status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GrpcTestServer, startGrpcTestServer, TestServiceClient } from '../src/grpc/index.js';
import { deterministicChunks, deterministicSha256 } from '../src/index.js';

// The service on its own, with a grpc-js client and no tunnel: what the end-to-end tests take as given.
let server: GrpcTestServer;
let client: TestServiceClient;
beforeAll(async () => {
  server = await startGrpcTestServer();
  client = new TestServiceClient(server.address, credentials.createInsecure());
});
afterAll(async () => {
  client.close();
  await server.close();
});

describe('the gRPC test service', () => {
  it('Echo answers the message and returns x-echo-* metadata (text and -bin) in headers and trailers', async () => {
    const metadata = new Metadata();
    metadata.set('x-echo-text', 'hello');
    metadata.set('x-echo-data-bin', Buffer.from([0, 1, 255]));
    metadata.set('x-other', 'not echoed');
    const { outcome } = client.unary('Echo', { message: 'hi', payload: Buffer.from('abc') }, { metadata });
    const { reply, headers, status: final } = await outcome;
    expect(reply?.message).toBe('hi');
    expect(reply?.payload.toString()).toBe('abc');
    expect(headers?.get('x-echo-text')).toEqual(['hello']);
    expect(headers?.get('x-other')).toEqual([]);
    expect(final.metadata.get('x-echo-data-bin')).toEqual([Buffer.from([0, 1, 255])]);
  });

  it('Count, Sum and Chat stream as declared', async () => {
    const indexes: number[] = [];
    for await (const reply of client.serverStream('Count', { count: 5 })) indexes.push(reply.index);
    expect(indexes).toEqual([0, 1, 2, 3, 4]);

    const sum = client.clientStream('Sum');
    for (const value of [1, 2, 3, 2 ** 40]) sum.call.write({ value });
    sum.call.end();
    expect((await sum.outcome).reply).toEqual({ sum: 6 + 2 ** 40, count: 4 });

    const chat = client.bidi();
    const answers: string[] = [];
    chat.on('data', (m: { text: string }) => answers.push(m.text));
    chat.write({ text: 'a' });
    chat.write({ text: 'b' });
    chat.end();
    await new Promise((resolve) => chat.on('status', resolve));
    expect(answers).toEqual(['echo: a', 'echo: b']);
  });

  it('Wait reports the cancel it sees; Fail answers its status with x-detail-bin in the trailers', async () => {
    const started = server.nextCall('Wait', 'w1');
    const { call, outcome } = client.unary('Wait', { tag: 'w1' });
    await started;
    const cancelled = server.nextCancel('Wait', 'w1');
    call.cancel();
    await cancelled;
    expect((await outcome).status.code).toBe(status.CANCELLED);

    const failed = await client.unary('Fail', {
      code: 5,
      message: 'not here: é',
      detail: Buffer.from([7, 0, 7]),
    }).outcome;
    expect(failed.error?.code).toBe(status.NOT_FOUND);
    expect(failed.status.details).toBe('not here: é');
    expect(failed.status.metadata.get('x-detail-bin')).toEqual([Buffer.from([7, 0, 7])]);
  });

  it('Download and Upload move deterministic bytes with the checksum intact', async () => {
    const size = 3 * 65_536 + 17;
    const hash = createHash('sha256');
    for await (const chunk of client.serverStream('Download', { size, chunkSize: 10_000 }))
      hash.update(chunk.data);
    expect(hash.digest('hex')).toBe(deterministicSha256(size));

    const upload = client.clientStream('Upload');
    for (const chunk of deterministicChunks(size)) upload.call.write({ data: chunk });
    upload.call.end();
    expect((await upload.outcome).reply).toEqual({ bytes: size, sha256: deterministicSha256(size) });
  });
});
