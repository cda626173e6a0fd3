import type { ServerResponse } from 'node:http';

/** A reader whose socket holds more than this unsent is too slow: it is dropped, not buffered for. */
const MAX_PENDING_BYTES = 1024 * 1024;
export const PING_INTERVAL_MS = 15_000;

/** The SSE readers of `GET /api/events`: each event is written to all; a reader that falls behind is dropped. */
export class EventStream {
  readonly #clients = new Set<ServerResponse>();
  readonly #ping: NodeJS.Timeout;

  constructor(pingMs = PING_INTERVAL_MS) {
    this.#ping = setInterval(() => this.#write(': ping\n\n'), pingMs);
    this.#ping.unref();
  }

  get size(): number {
    return this.#clients.size;
  }

  add(res: ServerResponse): void {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      connection: 'keep-alive',
    });
    res.write(': connected\n\n');
    this.#clients.add(res);
    res.on('close', () => this.#clients.delete(res));
  }

  send(event: string, data: unknown): void {
    if (this.#clients.size === 0) return;
    this.#write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  #write(text: string): void {
    for (const res of this.#clients) {
      if (res.writableLength > MAX_PENDING_BYTES) {
        this.#clients.delete(res);
        res.destroy();
        continue;
      }
      res.write(text);
    }
  }

  close(): void {
    clearInterval(this.#ping);
    for (const res of this.#clients) res.destroy();
    this.#clients.clear();
  }
}
