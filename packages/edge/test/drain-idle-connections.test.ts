import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { buildEdge, type Edge } from '../src/build-edge.js';

const silent = pino({ level: 'silent' });
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A raw keep-alive connection: sends a request, resolves with the next whole answer (up to its body). */
class RawConnection {
  readonly socket: Socket;
  #text = '';
  #waiter: (() => void) | undefined;
  ended = false;

  constructor(port: number) {
    this.socket = connect(port, '127.0.0.1');
    this.socket.on('error', () => {});
    this.socket.on('data', (chunk: Buffer) => {
      this.#text += chunk.toString('latin1');
      this.#waiter?.();
    });
    this.socket.on('end', () => {
      this.ended = true;
      this.#waiter?.();
    });
  }

  async get(path: string): Promise<string> {
    this.socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    for (;;) {
      const head = this.#text.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: (\d+)/i.exec(this.#text);
      if (head !== -1 && length !== null && this.#text.length >= head + 4 + Number(length[1])) {
        const answer = this.#text.slice(0, head + 4 + Number(length[1]));
        this.#text = this.#text.slice(answer.length);
        return answer;
      }
      if (this.ended) throw new Error(`closed before a whole answer: ${JSON.stringify(this.#text)}`);
      await new Promise<void>((resolve) => {
        this.#waiter = resolve;
      });
    }
  }
}

async function listening(
  options: Parameters<typeof buildEdge>[0] = {},
): Promise<{ edge: Edge; port: number }> {
  const edge = buildEdge({ port: 0, logger: silent, ...options });
  const { port } = await edge.listen();
  cleanups.push(() => edge.close(0));
  return { edge, port };
}

describe('idle keep-alive connections while the edge drains', () => {
  // Closing an idle keep-alive connection races with a client that has just sent a request on it: that
  // client sees a reset, after a request it cannot tell was read or not. The drain leaves them be.
  it('a request on a connection that was idle when the drain began is answered, with Connection: close', async () => {
    const { edge, port } = await listening();
    const client = new RawConnection(port);
    await once(client.socket, 'connect');
    expect(await client.get('/')).toMatch(/^HTTP\/1\.1 200 /);
    const closing = edge.close(10_000);
    // The edge stops listening once nothing is in flight (here at once), without touching the connection.
    await new Promise((resolve) => setImmediate(resolve));
    expect(edge.publicServer.listening).toBe(false);
    const answer = await client.get('/');
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toMatch(/\r\nconnection: close\r\n/i);
    await once(client.socket, 'close');
    await closing;
  });

  it('one that stays idle closes at its keep-alive timeout, and the drain ends then, not at the grace', async () => {
    const { edge, port } = await listening({ keepAliveTimeoutMs: 200 });
    const client = new RawConnection(port);
    await once(client.socket, 'connect');
    const answer = await client.get('/');
    // The client was told how long the edge keeps it: past that it does not send on it.
    expect(answer).toMatch(/\r\nkeep-alive: timeout=\d+\r\n/i);
    const closed = once(client.socket, 'close');
    // A grace longer than the test's timeout: only the keep-alive bound can end this drain.
    await edge.close(120_000);
    await closed;
    expect(client.ended).toBe(true);
  });

  it('one that never sent a request is closed once the keep-alive time has passed, not at the grace', async () => {
    // Its client may still send on it (a browser's pre-connect): it is left as long as a kept-alive one.
    const { edge, port } = await listening({
      keepAliveTimeoutMs: 200,
      headersTimeoutMs: 600_000,
      requestTimeoutMs: 0,
    });
    const client = new RawConnection(port);
    await once(client.socket, 'connect');
    const closed = once(client.socket, 'close');
    // A grace longer than the test's timeout: only the keep-alive bound can end this drain.
    await edge.close(120_000);
    await closed;
    expect(client.ended).toBe(true);
  });
});
