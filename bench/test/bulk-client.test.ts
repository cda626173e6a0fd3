import { createHash } from 'node:crypto';
import { getEventListeners } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import { createTestBackend, deterministicSha256 } from '@tunnel2/test-backend';
import { afterEach, describe, expect, it } from 'vitest';
import { BenchErrorCode } from '../src/errors.js';
import { bulkDownload, bulkUpload, chunkedUpload, download } from '../src/measure/bulk-client.js';

// The bulk bench's raw-socket HTTP/1.1 client against real loopback servers that answer byte by byte as
// scripted, so every framing case (a head split across reads, a short body, a wrong status) is exercised.

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((done) => s.close(done))));
});

/** A server whose answer is written by `answer` once the request head (and `bodyBytes` of body) arrived. */
async function serve(answer: (socket: Socket, request: string, bodyBytes: number) => void): Promise<{
  origin: string;
  host: string;
}> {
  const server = createServer((socket) => {
    let text = '';
    let body = 0;
    let answered = false;
    socket.on('data', (chunk: Buffer) => {
      const headEnd = text.indexOf('\r\n\r\n');
      if (headEnd < 0) {
        text += chunk.toString('latin1');
        const end = text.indexOf('\r\n\r\n');
        if (end >= 0) body = text.length - end - 4;
      } else body += chunk.length;
      const end = text.indexOf('\r\n\r\n');
      const wanted = Number(/content-length: (\d+)/i.exec(text)?.[1] ?? 0);
      if (end >= 0 && body >= wanted && !answered) {
        answered = true;
        answer(socket, text.slice(0, end), body);
      }
    });
    socket.on('error', () => {});
  });
  servers.push(server);
  await new Promise<void>((ready) => server.listen(0, '127.0.0.1', ready));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { origin: `http://127.0.0.1:${address.port}`, host: 'bulk.localhost' };
}

/** Writes `parts` one per event-loop turn, so the client sees them as separate reads. */
async function writeApart(socket: Socket, parts: (string | Buffer)[]): Promise<void> {
  for (const part of parts) {
    socket.write(part);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** The real test backend (its /upload hashes, its /bytes are deterministic), closed after `use`. */
async function withBackend(use: (target: { origin: string; host: string }) => Promise<void>): Promise<void> {
  const backend = await createTestBackend();
  try {
    await use({ origin: `http://127.0.0.1:${backend.port}`, host: `127.0.0.1:${backend.port}` });
  } finally {
    await backend.close();
  }
}

describe('bulk client', () => {
  it('counts a download whose head and body arrive split across reads, and sends the Host it was given', async () => {
    let seen = '';
    const target = await serve((socket, request) => {
      seen = request;
      const body = Buffer.alloc(300_000, 1);
      void writeApart(socket, [
        'HTTP/1.1 200 OK\r\ncontent-le',
        'ngth: 300000\r\n\r',
        Buffer.concat([Buffer.from('\n'), body.subarray(0, 10)]),
        body.subarray(10),
      ]);
    });
    await expect(bulkDownload(target, 300_000)).resolves.toBe(300_000);
    expect(seen).toMatch(/^GET \/bytes\/300000 HTTP\/1\.1\r\nhost: bulk\.localhost\r\n/);
  });

  it('a zero-length body resolves at once', async () => {
    const target = await serve((socket) => socket.write('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n'));
    await expect(bulkDownload(target, 0)).resolves.toBe(0);
  });

  it('rejects a body cut short, naming how much arrived', async () => {
    const target = await serve((socket) => {
      socket.end(`HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n${'x'.repeat(400)}`);
    });
    await expect(bulkDownload(target, 1000)).rejects.toMatchObject({
      code: BenchErrorCode.TRANSFER,
      message: 'the connection closed after 400 of 1000 body bytes',
    });
  });

  it('rejects an answer other than 200, with its status', async () => {
    const target = await serve((socket) =>
      socket.write('HTTP/1.1 502 Bad Gateway\r\ncontent-length: 2\r\n\r\nno'),
    );
    await expect(bulkDownload(target, 10)).rejects.toMatchObject({
      code: BenchErrorCode.TRANSFER,
      message: 'the download answered 502',
    });
  });

  it('rejects more bytes than the Content-Length', async () => {
    const target = await serve((socket) =>
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nabcdef'),
    );
    await expect(bulkDownload(target, 3)).rejects.toThrow(
      '6 body bytes arrived, more than the Content-Length 3',
    );
  });

  it('rejects a chunked answer by name instead of counting its framing as body', async () => {
    const target = await serve((socket) =>
      socket.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n'),
    );
    await expect(bulkDownload(target, 3)).rejects.toThrow(
      'Transfer-Encoding: chunked; bulk expects a Content-Length',
    );
  });

  it('rejects a server that closes before answering, and a head that is not HTTP', async () => {
    const silent = await serve((socket) => socket.end());
    await expect(bulkDownload(silent, 5)).rejects.toThrow('the connection closed before the answer');
    const garbage = await serve((socket) => socket.write('SSH-2.0-OpenSSH\r\n\r\n'));
    await expect(bulkDownload(garbage, 5)).rejects.toThrow('not an HTTP/1.1 status line: "SSH-2.0-OpenSSH"');
  });

  it('uploads every byte with a Content-Length and resolves with the count the server answered', async () => {
    let received = -1;
    let head = '';
    const target = await serve((socket, request, bodyBytes) => {
      received = bodyBytes;
      head = request;
      const json = JSON.stringify({ bytes: bodyBytes });
      socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${json.length}\r\n\r\n${json}`);
    });
    // 5 MiB in 256 KiB chunks plus a partial one: the last chunk is cut to fit.
    const bytes = 5 * 2 ** 20 + 1234;
    await expect(bulkUpload(target, bytes, Buffer.alloc(256 * 1024, 0x5a))).resolves.toBe(bytes);
    expect(received).toBe(bytes);
    expect(head).toContain(`content-length: ${bytes}`);
  });

  it('rejects an upload the server refuses, quoting its answer', async () => {
    const target = await serve((socket) => {
      socket.write('HTTP/1.1 413 Payload Too Large\r\ncontent-length: 9\r\n\r\ntoo large');
    });
    await expect(bulkUpload(target, 10, Buffer.alloc(10))).rejects.toThrow(
      'the upload answered 413: too large',
    );
  });

  it('a chunked upload stopped midway ends its body properly: the chunks taken are exactly the chunks sent', async () => {
    await withBackend(async (target) => {
      const stop = new AbortController();
      const hash = createHash('sha256');
      let taken = 0;
      const chunks = function* (): Generator<Buffer> {
        for (let i = 0; i < 1000; i++) {
          const chunk = Buffer.alloc(64 * 1024, i);
          hash.update(chunk);
          taken += 1;
          // Stop after the 5th chunk is taken: it must still be sent, and no 6th taken.
          if (taken === 5) stop.abort();
          yield chunk;
        }
      };
      const { sent, text } = await chunkedUpload(target, '/upload', chunks(), stop.signal);
      expect(taken).toBe(5);
      expect(sent).toBe(5 * 64 * 1024);
      expect(JSON.parse(text)).toEqual({ bytes: sent, sha256: hash.digest('hex') });
    });
  });

  it('a download stopped by its signal resolves with what arrived, marked cut, every byte seen in order', async () => {
    await withBackend(async (target) => {
      const stop = new AbortController();
      const hash = createHash('sha256');
      const response = await download(target, `/bytes/${2 ** 40}`, {
        signal: stop.signal,
        onBody: (chunk) => {
          hash.update(chunk);
          stop.abort();
        },
      });
      expect(response.cut).toBe(true);
      expect(response.bodyBytes).toBeGreaterThan(0);
      expect(response.firstByteAt).toBeGreaterThan(0);
      expect(hash.digest('hex')).toBe(deterministicSha256(response.bodyBytes));
    });
  });

  it('a download given an already aborted signal stops at once and leaves no listener on the signal', async () => {
    await withBackend(async (target) => {
      // A shared signal (one time limit for parallel downloads) must not collect a listener per transfer.
      const signal = AbortSignal.abort();
      await expect(download(target, '/bytes/1024', { signal })).rejects.toThrow(/stopped before the answer/);
      expect(getEventListeners(signal, 'abort')).toHaveLength(0);
    });
  });
});
