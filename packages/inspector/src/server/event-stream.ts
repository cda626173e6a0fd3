import type { ServerResponse } from 'node:http';
import { InspectorError, InspectorErrorCode } from '../errors.js';

/** A reader whose socket holds more than this unsent is too slow: it is dropped, not buffered for. */
export const MAX_PENDING_BYTES = 1024 * 1024;
/**
 * Readers at once (pages, scripts); a new one beyond it is refused, never served by dropping an older one: a
 * flood of streams must not push the page's own out. A page that closes (a reload too) frees its place.
 */
export const MAX_READERS = 16;
export const PING_INTERVAL_MS = 15_000;

/**
 * The SSE readers of `GET /api/events`: each event is serialized once and written to all; a reader that falls
 * behind is dropped and no more than MAX_READERS are served, so what the stream holds is bounded by
 * MAX_READERS × MAX_PENDING_BYTES (plus one event) whatever the pages do.
 */
export class EventStream {
  readonly #clients = new Set<ServerResponse>();
  readonly #ping: NodeJS.Timeout;
  readonly #onReaders: (readers: number) => void;

  /** `onReaders`: told the count whenever a reader comes or goes (the inspector listens only while any do). */
  constructor(pingMs = PING_INTERVAL_MS, onReaders: (readers: number) => void = () => {}) {
    this.#onReaders = onReaders;
    this.#ping = setInterval(() => this.#write(': ping\n\n'), pingMs);
    this.#ping.unref();
  }

  get size(): number {
    return this.#clients.size;
  }

  /** Starts serving `res`; throws BUSY (before writing anything) when MAX_READERS are served already. */
  add(res: ServerResponse): void {
    if (this.#clients.size >= MAX_READERS) {
      throw new InspectorError(
        InspectorErrorCode.BUSY,
        `${MAX_READERS} live event streams are open already (other tabs or scripts): close one and retry`,
      );
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      connection: 'keep-alive',
    });
    res.write(': connected\n\n');
    this.#clients.add(res);
    res.on('close', () => this.#drop(res));
    this.#onReaders(this.#clients.size);
  }

  #drop(res: ServerResponse): void {
    if (!this.#clients.delete(res)) return;
    res.destroy();
    this.#onReaders(this.#clients.size);
  }

  send(event: string, data: unknown): void {
    if (this.#clients.size === 0) return;
    this.#write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  #write(text: string): void {
    for (const res of this.#clients) {
      if (res.writableLength > MAX_PENDING_BYTES) {
        this.#drop(res);
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
