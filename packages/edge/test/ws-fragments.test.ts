import type { AddressInfo, Socket } from 'node:net';
import { sendCorkedPieces, WS_FRAGMENT_SIZE } from '@tunnel2/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { type RawData, WebSocket, WebSocketServer } from 'ws';

const servers: WebSocketServer[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    for (const client of server.clients) client.terminate();
    await new Promise((resolve) => server.close(resolve));
  }
});

/**
 * Sends `message` (one buffer, or pieces) with sendCorkedPieces from a client (the stream beneath given when
 * `corked`) to a server reading with `binaryType`; returns what arrived and how many writes reached the
 * client's socket.
 */
async function roundTrip(
  message: Buffer | readonly Buffer[],
  binaryType: 'nodebuffer' | 'fragments',
  corked = false,
): Promise<{ data: RawData; writes: number }> {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  servers.push(server);
  await new Promise((resolve) => server.once('listening', resolve));
  const received = new Promise<RawData>((resolve) => {
    server.once('connection', (socket) => {
      socket.binaryType = binaryType;
      socket.once('message', (data) => resolve(data));
    });
  });
  const client = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`);
  let beneath: Socket | undefined;
  client.once('upgrade', (response) => {
    beneath = response.socket;
  });
  await new Promise((resolve) => client.once('open', resolve));
  const stream = beneath as Socket & { _writev: Socket['_writev']; _write: Socket['_write'] };
  let writes = 0;
  const writev = stream._writev?.bind(stream);
  const write = stream._write.bind(stream);
  stream._writev = (chunks, cb) => {
    writes++;
    writev?.(chunks, cb);
  };
  stream._write = (chunk, encoding, cb) => {
    writes++;
    write(chunk, encoding, cb);
  };
  const sent = new Promise<Error | null | undefined>((resolve) =>
    sendCorkedPieces(
      client,
      corked ? stream : undefined,
      Buffer.isBuffer(message) ? [message] : message,
      resolve,
    ),
  );
  expect(await sent).toBeFalsy();
  const data = await received;
  const counted = writes;
  client.close();
  return { data, writes: counted };
}

describe('sendCorkedPieces', () => {
  const message = Buffer.from(Array.from({ length: 3 * WS_FRAGMENT_SIZE + 123 }, (_, i) => i % 251));

  it('an unmodified receiver (binaryType nodebuffer) gets the same single message', async () => {
    const { data } = await roundTrip(message, 'nodebuffer');
    expect(Buffer.isBuffer(data)).toBe(true);
    expect((data as Buffer).equals(message)).toBe(true);
  });

  it('a receiver taking fragments gets them in order, none above the fragment size', async () => {
    const { data } = await roundTrip(message, 'fragments');
    expect(Array.isArray(data)).toBe(true);
    const pieces = data as Buffer[];
    expect(pieces).toHaveLength(4);
    for (const piece of pieces) expect(piece.length).toBeLessThanOrEqual(WS_FRAGMENT_SIZE);
    expect(Buffer.concat(pieces).equals(message)).toBe(true);
  });

  it('a message no bigger than one fragment goes as one frame', async () => {
    const small = message.subarray(0, 100);
    const { data } = await roundTrip(small, 'fragments');
    expect(Buffer.concat(data as Buffer[]).equals(small)).toBe(true);
    expect(data as Buffer[]).toHaveLength(1);
  });

  it('writes all of a message’s fragments at once when the stream beneath is known', async () => {
    const { writes, data } = await roundTrip(message, 'fragments', true);
    expect(writes).toBe(1);
    expect(data).toHaveLength(4);
    expect(Buffer.concat(data as Buffer[]).equals(message)).toBe(true);
  });

  it('without it, each fragment is a write of its own (the same fragments arrive)', async () => {
    const { writes, data } = await roundTrip(message, 'fragments');
    expect(writes).toBe(4);
    expect(data).toHaveLength(4);
    expect(Buffer.concat(data as Buffer[]).equals(message)).toBe(true);
  });

  it('pieces become fragments in order, a long one cut into views of itself, and arrive as one message', async () => {
    const head = Buffer.from('frame header');
    const payload = message.subarray(0, 2 * WS_FRAGMENT_SIZE + 7);
    const tail = Buffer.from('tail');
    const pieces = [head, payload, tail];
    const joined = Buffer.concat(pieces);
    const whole = await roundTrip(pieces, 'nodebuffer');
    expect((whole.data as Buffer).equals(joined)).toBe(true);
    const { data, writes } = await roundTrip(pieces, 'fragments', true);
    expect((data as Buffer[]).map((piece) => piece.length)).toEqual([
      head.length,
      WS_FRAGMENT_SIZE,
      WS_FRAGMENT_SIZE,
      7,
      tail.length,
    ]);
    expect(Buffer.concat(data as Buffer[]).equals(joined)).toBe(true);
    expect(writes).toBe(1);
  });

  it('no pieces at all still send one (empty) message and call back', async () => {
    const { data } = await roundTrip([], 'nodebuffer');
    expect((data as Buffer).length).toBe(0);
  });
});
