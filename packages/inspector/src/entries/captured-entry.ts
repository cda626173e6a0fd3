import { decodeRequestHead, decodeResponseHead } from '@tunnel2/protocol';
import { decodeBody } from './body-decoding.js';
import type { EntryError, WebSocketTraffic } from './entry.js';
import type { StoredBody, StoredEntry } from './stored-entry.js';

/** The fields most exchanges do not have, kept beside an entry's slot only when it has one. */
export interface EntryExtras {
  error?: EntryError;
  replayOf?: string;
  /** Given by the recorder's caller (a replay); else read from X-Forwarded-For when shown. */
  clientAddress?: string;
  ws?: WebSocketTraffic;
  /** The response's trailers, flat name, value, ... */
  trailers?: readonly string[] | undefined;
}

/** Where a snapshot's body decodings are cached (the store, within its budget, while the entry is kept). */
export interface DecodingCache {
  readonly decodeLimit: number;
  cachedDecoding(id: number, side: 0 | 1): Buffer | null | undefined;
  cacheDecoding(id: number, side: 0 | 1, decoded: Buffer | null): void;
}

/** A slot's numbers and the place of its bytes: [request head][response head][request body][response body]. */
export interface SlotFields {
  id: number;
  startedAt: number;
  durationMs: number;
  ttfbMs: number | null;
  status: number;
  kind: 'http' | 'websocket';
  chunk: Buffer;
  offset: number;
  requestHead: number;
  responseHead: number;
  requestCaptured: number;
  responseCaptured: number;
  requestSize: number;
  responseSize: number;
  cost: number;
  flightSeq: number;
  extras: EntryExtras | undefined;
}

const NO_HEADERS: readonly string[] = [];

/** Method (u8 length) and target (u16 length) lead a request head: read without decoding the rest. */
export function requestLine(head: Buffer): { method: string; target: string } {
  const methodEnd = 1 + head[0]!;
  const targetEnd = methodEnd + 2 + head.readUInt16BE(methodEnd);
  return {
    method: head.toString('latin1', 1, methodEnd),
    target: head.toString('latin1', methodEnd + 2, targetEnd),
  };
}

/** A body of a stored entry: a view of its bytes in the arena, decoded (and cached) when asked. */
class ArenaBody implements StoredBody {
  readonly size: number;
  readonly captured: number;
  readonly #bytes: Buffer;
  readonly #cache: DecodingCache;
  readonly #id: number;
  readonly #side: 0 | 1;

  constructor(bytes: Buffer, size: number, cache: DecodingCache, id: number, side: 0 | 1) {
    this.#bytes = bytes;
    this.size = size;
    this.captured = bytes.length;
    this.#cache = cache;
    this.#id = id;
    this.#side = side;
  }

  get truncated(): boolean {
    return this.size > this.captured;
  }

  bytes(): Buffer {
    return this.#bytes;
  }

  decoded(encoding: string | undefined): Buffer | undefined {
    if (encoding === undefined || this.truncated || this.captured === 0) return undefined;
    const cached = this.#cache.cachedDecoding(this.#id, this.#side);
    if (cached !== undefined) return cached ?? undefined;
    const decoded = decodeBody(this.#bytes, encoding, Math.max(1, this.#cache.decodeLimit));
    this.#cache.cacheDecoding(this.#id, this.#side, decoded ?? null);
    return decoded;
  }
}

/**
 * A stored entry as read: built from its slot when the API asks (the store keeps no object per entry), its
 * heads decoded from the protocol's encoding when first read. The bytes it views are never overwritten, so
 * a snapshot stays whole after its entry is evicted.
 */
export class CapturedEntry implements StoredEntry {
  readonly id: string;
  readonly startedAt: number;
  readonly durationMs: number;
  readonly ttfbMs: number | null;
  readonly clientAddress: string | null;
  readonly method: string;
  readonly target: string;
  readonly status: number;
  readonly request: StoredBody;
  readonly response: StoredBody;
  readonly kind: 'http' | 'websocket';
  readonly error: EntryError | undefined;
  readonly replayOf: string | undefined;
  readonly ws: WebSocketTraffic | undefined;
  readonly responseTrailers: readonly string[];
  readonly cost: number;
  readonly flightSeq: number;
  readonly #requestHead: Buffer;
  readonly #responseHead: Buffer | undefined;
  #requestHeaders: readonly string[] | undefined;
  #responseHeaders: readonly string[] | undefined;

  constructor(cache: DecodingCache, f: SlotFields) {
    this.id = String(f.id);
    this.startedAt = f.startedAt;
    this.durationMs = f.durationMs;
    this.ttfbMs = f.ttfbMs;
    this.status = f.status;
    this.kind = f.kind;
    this.cost = f.cost;
    this.flightSeq = f.flightSeq;
    this.clientAddress = f.extras?.clientAddress ?? null;
    this.error = f.extras?.error;
    this.replayOf = f.extras?.replayOf;
    this.ws = f.extras?.ws;
    this.responseTrailers = f.extras?.trailers ?? NO_HEADERS;
    let o = f.offset;
    this.#requestHead = f.chunk.subarray(o, o + f.requestHead);
    o += f.requestHead;
    this.#responseHead = f.responseHead === 0 ? undefined : f.chunk.subarray(o, o + f.responseHead);
    o += f.responseHead;
    this.request = new ArenaBody(f.chunk.subarray(o, o + f.requestCaptured), f.requestSize, cache, f.id, 0);
    o += f.requestCaptured;
    this.response = new ArenaBody(
      f.chunk.subarray(o, o + f.responseCaptured),
      f.responseSize,
      cache,
      f.id,
      1,
    );
    ({ method: this.method, target: this.target } = requestLine(this.#requestHead));
  }

  get requestHeaders(): readonly string[] {
    this.#requestHeaders ??= decodeRequestHead(this.#requestHead).headers;
    return this.#requestHeaders;
  }

  get responseHeaders(): readonly string[] {
    if (this.#responseHead === undefined) return NO_HEADERS;
    this.#responseHeaders ??= decodeResponseHead(this.#responseHead).headers;
    return this.#responseHeaders;
  }

  /** Read from the kept head when asked (the raw view alone shows it): the list of fields is not decoded again. */
  get responseStatusText(): string {
    if (this.#responseHead === undefined) return '';
    // The head: status (u16), then the reason (u8 length), as the protocol encodes it (PROTOCOL.md).
    const length = this.#responseHead[2] ?? 0;
    return this.#responseHead.toString('latin1', 3, 3 + length);
  }
}
