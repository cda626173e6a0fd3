import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { EventStream, MAX_PENDING_BYTES, MAX_READERS } from '../src/server/event-stream.js';

interface Fixture {
  server: Server;
  events: EventStream;
  /** The server's side of each reader, in the order they connected. */
  readers: ServerResponse[];
  port: number;
}

const open: Fixture[] = [];

async function start(): Promise<Fixture> {
  const events = new EventStream();
  const readers: ServerResponse[] = [];
  const server = createServer((_req, res) => {
    readers.push(res);
    try {
      events.add(res);
    } catch {
      res.writeHead(503).end();
    }
    server.emit('reader', res);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const fixture = {
    server,
    events,
    readers,
    port: typeof address === 'object' && address ? address.port : 0,
  };
  open.push(fixture);
  return fixture;
}

/** A reader of /api/events over a raw socket (it reads only if told to). */
async function reader(f: Fixture, read: boolean): Promise<Socket> {
  const socket = connect(f.port, '127.0.0.1');
  socket.on('error', () => {});
  const added = once(f.server, 'reader');
  socket.write('GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  if (read) socket.resume();
  else socket.pause();
  await added;
  return socket;
}

afterEach(async () => {
  for (const f of open.splice(0)) {
    f.events.close();
    f.server.closeAllConnections();
    await new Promise((resolve) => f.server.close(resolve));
  }
});

describe('the live event stream (SSE) of the API', () => {
  it('drops a reader that stops reading instead of buffering for it', async () => {
    const f = await start();
    const slow = await reader(f, false);
    const fast = await reader(f, true);
    const [slowRes] = f.readers;
    const event = { path: `/${'x'.repeat(16 * 1024)}` };
    const eventBytes = JSON.stringify(event).length + 32;
    let most = 0;
    // 64 MiB offered at most: far more than the socket buffers and the 1 MiB allowance together.
    for (let i = 0; i < 4096 && f.events.size === 2; i++) {
      f.events.send('entry', event);
      most = Math.max(most, slowRes!.writableLength);
      // Let the fast reader drain and the kernel take what it takes.
      if (i % 16 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    expect(f.events.size).toBe(1);
    expect(most).toBeLessThanOrEqual(MAX_PENDING_BYTES + eventBytes);
    expect(slowRes!.destroyed).toBe(true);
    // The reader that kept up still gets events.
    const more = once(fast, 'data');
    f.events.send('entry', { path: '/after' });
    await more;
    slow.destroy();
    fast.destroy();
  });

  it('forgets a reader that went away', async () => {
    const f = await start();
    const socket = await reader(f, true);
    expect(f.events.size).toBe(1);
    const closed = once(f.readers[0]!, 'close');
    socket.destroy();
    await closed;
    expect(f.events.size).toBe(0);
    f.events.send('entry', { path: '/nobody' });
  });

  it(`holds at most ${MAX_READERS} readers: a new one is refused, the ones served keep their place`, async () => {
    const f = await start();
    const sockets: Socket[] = [];
    for (let i = 0; i < MAX_READERS; i++) sockets.push(await reader(f, true));
    const refused = connect(f.port, '127.0.0.1');
    refused.setEncoding('utf8');
    const head = new Promise<string>((resolve) => {
      let answer = '';
      refused.on('data', (text: string) => {
        answer += text;
        if (answer.includes('\r\n\r\n')) resolve(answer);
      });
    });
    refused.write('GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    const answer = await head;
    expect(answer).toMatch(/^HTTP\/1\.1 503 /);
    expect(f.events.size).toBe(MAX_READERS);
    expect(f.readers.slice(0, MAX_READERS).every((res) => !res.destroyed)).toBe(true);
    // The first reader still gets events.
    const more = once(sockets[0]!, 'data');
    f.events.send('entry', { path: '/after' });
    await more;
    for (const s of [...sockets, refused]) s.destroy();
  });
});
