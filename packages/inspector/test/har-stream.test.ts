import { once } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createCapture } from '../src/capture/capture.js';
import { EntryStore } from '../src/capture/entry-store.js';
import { streamHar } from '../src/views/har-stream.js';
import { textBody } from './support/full-store.js';

describe('streamHar', () => {
  it('drops a reader that takes nothing for stallMs, holding no more than a slice beyond its socket', async () => {
    const store = new EntryStore();
    for (let i = 0; i < 8; i++) {
      const r = createCapture(store, 1 << 20).begin({ method: 'GET', target: `/${i}`, headers: [] })!;
      r.responseHead(200, []);
      r.responseData(textBody(1 << 20, i));
      r.finish();
    }
    let most = 0;
    let served: ServerResponse | undefined;
    let exported: Promise<void> | undefined;
    const server = createServer((_req, res) => {
      served = res;
      res.writeHead(200);
      const write = res.write.bind(res);
      // Watch what waits in the response's own buffer at each write.
      res.write = ((chunk: string) => {
        most = Math.max(most, res.writableLength);
        return write(chunk);
      }) as typeof res.write;
      exported = streamHar(res, store.ids(), {
        get: (id) => store.get(id),
        baseUrl: 'http://x',
        version: 'test',
        stallMs: 200,
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
    socket.pause();
    socket.write('GET /api/har HTTP/1.1\r\nHost: x\r\n\r\n');
    socket.on('error', () => {});
    await once(server, 'request');
    await once(served!, 'close');
    await exported;
    expect(served!.destroyed).toBe(true);
    // The response's buffer never held more than its high-water mark and one slice (48 KiB of text,
    // escaped) beyond it, while 8 MiB waited to be exported.
    expect(most).toBeLessThan(served!.writableHighWaterMark + 4 * 48 * 1024);
    socket.destroy();
    server.close();
  });
});
