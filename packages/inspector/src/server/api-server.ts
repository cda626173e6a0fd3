import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { EntryStore } from '../capture/entry-store.js';
import { parseEdits, type ReplayTarget, replay } from '../capture/replay.js';
import type { StoredEntry } from '../entries/stored-entry.js';
import { InspectorError, InspectorErrorCode, inspectorErrorStatus } from '../errors.js';
import { serveStatic } from '../static-files.js';
import { toCurl } from '../views/curl.js';
import { matches, parseFilter } from '../views/entry-filter.js';
import { toEntry, toSummary } from '../views/entry-view.js';
import { harFileName } from '../views/har-file-name.js';
import { streamHar } from '../views/har-stream.js';
import { toInFlightSummary } from '../views/inflight-view.js';
import { TimeSlicer } from '../views/time-slicer.js';
import { hostsOf, rawExchange } from '../views/wire-view.js';
import type { EventStream } from './event-stream.js';
import { crossOriginRefusal } from './origin-guard.js';
import type { WorkGate } from './work-gate.js';

export interface ApiContext {
  store: EntryStore;
  events: EventStream;
  bodyLimit: number;
  target: ReplayTarget;
  version: string;
  staticDir: string;
  publicUrl(): string | null;
  /** A replica's count of the agents serving its name, as the edge said at connect; null when not one. */
  replicas(): number | null;
  /** The tunnel's name (HAR file names), null while unknown. */
  tunnelName(): string | null;
  /** The DNS-rebinding guard (see host-guard.ts). */
  hostAllowed(host: string | undefined): boolean;
  /** Aborted when the inspector closes: replays under way are cancelled. */
  closing: AbortSignal;
  /** Places for the expensive reads (HAR exports, body searches). */
  gate: WorkGate;
}

const MAX_LIST = 1_000;
const DEFAULT_LIST = 100;

/** `?limit=`: an integer from 1 to MAX_LIST, DEFAULT_LIST when absent. */
function limitOf(url: URL): number {
  const param = url.searchParams.get('limit');
  const limit = param === null ? DEFAULT_LIST : Number(param);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST) {
    throw new InspectorError(InspectorErrorCode.BAD_REQUEST, `limit: an integer from 1 to ${MAX_LIST}`);
  }
  return limit;
}
/** On every API answer: never cached, never sniffed, never framed (the page's files say the same). */
const NO_STORE = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'content-security-policy': "frame-ancestors 'none'",
};
/** Seconds a caller refused as BUSY is told to wait. */
const BUSY_RETRY_AFTER_S = 1;

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, {
    ...NO_STORE,
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

function sendError(res: ServerResponse, error: InspectorError): void {
  if (error.code === InspectorErrorCode.BUSY) res.setHeader('retry-after', String(BUSY_RETRY_AFTER_S));
  sendJson(res, inspectorErrorStatus[error.code], { error: { code: error.code, message: error.message } });
}

/** A JSON request body, read up to `limit` bytes (a larger one is refused, never buffered). */
async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit)
      throw new InspectorError(InspectorErrorCode.BAD_REQUEST, `request body over ${limit} bytes`);
    chunks.push(chunk);
  }
  if (size === 0) return undefined;
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (err) {
    throw new InspectorError(InspectorErrorCode.BAD_REQUEST, 'the body is not JSON', { cause: err });
  }
}

function entryOr404(ctx: ApiContext, id: string): StoredEntry {
  const entry = ctx.store.get(id);
  if (entry === undefined) {
    throw new InspectorError(
      InspectorErrorCode.ENTRY_NOT_FOUND,
      `no entry ${id} (evicted, cleared or never seen)`,
    );
  }
  return entry;
}

function methodNotAllowed(method: string | undefined, path: string): InspectorError {
  return new InspectorError(InspectorErrorCode.METHOD_NOT_ALLOWED, `${method} is not allowed on ${path}`);
}

/** Where `GET /api/entries/:id/curl` points by default: the public URL, else the local target. */
function curlBase(ctx: ApiContext, local: boolean): { baseUrl: string; keepForwarded: boolean } {
  const publicUrl = ctx.publicUrl();
  if (local || publicUrl === null)
    return { baseUrl: ctx.target.origin + ctx.target.basePath, keepForwarded: true };
  return { baseUrl: publicUrl, keepForwarded: false };
}

async function routeApi(ctx: ApiContext, req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
  const { store } = ctx;
  const path = url.pathname;
  const method = req.method ?? 'GET';
  if (path === '/api/status') {
    if (method !== 'GET') throw methodNotAllowed(method, path);
    sendJson(res, 200, {
      paused: store.paused,
      count: store.count,
      bytes: store.bytes,
      budgetBytes: store.budgetBytes,
      maxEntries: store.maxEntries,
      inFlight: store.inFlightCount,
      bodyLimit: ctx.bodyLimit,
      publicUrl: ctx.publicUrl(),
      name: ctx.tunnelName(),
      replicas: ctx.replicas(),
      target: ctx.target.origin + ctx.target.basePath,
    });
    return;
  }
  if (path === '/api/inflight') {
    if (method !== 'GET') throw methodNotAllowed(method, path);
    // Summaries are built for the listed ones only: thousands may be running, each a head to decode.
    const exchanges = store.inFlight(limitOf(url)).map(toInFlightSummary);
    sendJson(res, 200, { exchanges, total: store.inFlightCount });
    return;
  }
  if (path === '/api/entries') {
    if (method === 'DELETE') {
      store.clear();
      sendJson(res, 200, { cleared: true });
      return;
    }
    if (method !== 'GET') throw methodNotAllowed(method, path);
    const filter = parseFilter(url.searchParams);
    const limit = limitOf(url);
    const before = url.searchParams.get('before');
    const beforeId = before === null ? Number.POSITIVE_INFINITY : Number(before);
    // A body search reads every stored body: it takes a place of the gate, and the loop is time-sliced.
    const release = filter.body === undefined ? () => {} : ctx.gate.enter('this body search');
    try {
      const slicer = new TimeSlicer();
      const ids = store.ids();
      const entries = [];
      for (let i = ids.length - 1; i >= 0 && entries.length < limit; i--) {
        if (Number(ids[i]) >= beforeId) continue;
        await slicer.yield();
        if (res.destroyed) return;
        const entry = store.get(ids[i]!);
        if (entry !== undefined && (await matches(entry, filter, slicer))) entries.push(toSummary(entry));
      }
      sendJson(res, 200, { entries });
    } finally {
      release();
    }
    return;
  }
  const one = /^\/api\/entries\/([^/]+)(\/replay|\/curl|\/raw)?$/.exec(path);
  if (one !== null) {
    const entry = entryOr404(ctx, decodeURIComponent(one[1]!));
    const action = one[2];
    if (action === undefined) {
      if (method !== 'GET') throw methodNotAllowed(method, path);
      sendJson(res, 200, { ...toEntry(entry), hosts: hostsOf(entry, ctx.target) });
    } else if (action === '/raw') {
      if (method !== 'GET') throw methodNotAllowed(method, path);
      sendJson(res, 200, rawExchange(entry));
    } else if (action === '/curl') {
      if (method !== 'GET') throw methodNotAllowed(method, path);
      const text = toCurl(entry, curlBase(ctx, url.searchParams.get('target') === 'local'));
      res.writeHead(200, { ...NO_STORE, 'content-type': 'text/plain; charset=utf-8' });
      res.end(text);
    } else {
      if (method !== 'POST') throw methodNotAllowed(method, path);
      const edits = parseEdits(await readJson(req, Math.ceil(ctx.bodyLimit * 1.4) + 256 * 1024));
      // A replay lives as long as its caller waits for it, and no longer than the inspector.
      const gone = new AbortController();
      res.once('close', () => gone.abort());
      const signal = AbortSignal.any([gone.signal, ctx.closing]);
      const replayed = await replay(entry, edits, ctx.target, store, ctx.bodyLimit, signal);
      if (res.destroyed) return;
      sendJson(res, 200, { entry: toSummary(replayed) });
    }
    return;
  }
  if (path === '/api/har') {
    if (method !== 'GET') throw methodNotAllowed(method, path);
    const wanted = url.searchParams.get('ids');
    const chosen =
      wanted === null || wanted === ''
        ? undefined
        : wanted.split(',').map((id) => entryOr404(ctx, id.trim()).id);
    const ids = chosen ?? store.ids();
    const redact = ['1', 'true', 'yes'].includes(url.searchParams.get('redact') ?? '');
    const release = ctx.gate.enter('this HAR export');
    try {
      res.writeHead(200, {
        ...NO_STORE,
        'content-type': 'application/json; charset=utf-8',
        // Safe characters only (har-file-name.ts): nothing to quote or escape.
        'content-disposition': `attachment; filename="${harFileName(ctx.tunnelName(), chosen, new Date())}"`,
      });
      // Streamed, never built whole: the store may hold 64 MiB, and a HAR is larger than what it encodes.
      await streamHar(res, ids, {
        get: (id) => store.get(id),
        redact,
        baseUrl: ctx.publicUrl() ?? ctx.target.origin,
        version: ctx.version,
        signal: ctx.closing,
      });
    } finally {
      release();
    }
    return;
  }
  if (path === '/api/capture') {
    if (method !== 'POST') throw methodNotAllowed(method, path);
    const body = await readJson(req, 4096);
    const paused = (body as { paused?: unknown } | undefined)?.paused;
    if (typeof paused !== 'boolean') {
      throw new InspectorError(InspectorErrorCode.BAD_REQUEST, 'expected { "paused": true | false }');
    }
    store.setPaused(paused);
    sendJson(res, 200, { paused: store.paused });
    return;
  }
  if (path === '/api/events') {
    if (method !== 'GET') throw methodNotAllowed(method, path);
    ctx.events.add(res);
    return;
  }
  throw new InspectorError(InspectorErrorCode.NOT_FOUND, `no API at ${path}`);
}

/** An unexpected failure as an answer: a malformed %-escape is the caller's; anything else is ours. */
function asInspectorError(err: unknown): InspectorError {
  if (err instanceof InspectorError) return err;
  if (err instanceof URIError) {
    return new InspectorError(InspectorErrorCode.BAD_REQUEST, `a malformed %-escape in the URL`, {
      cause: err,
    });
  }
  return new InspectorError(InspectorErrorCode.INTERNAL, String(err), { cause: err });
}

/** The inspector's request handler: the API under /api, the page's files elsewhere. */
export function createApiHandler(ctx: ApiContext): RequestListener {
  return (req, res) => {
    if (!ctx.hostAllowed(req.headers.host)) {
      sendError(
        res,
        new InspectorError(
          InspectorErrorCode.FORBIDDEN_HOST,
          `the inspector answers only on its own address or localhost, not Host "${req.headers.host ?? ''}"`,
        ),
      );
      return;
    }
    const url = new URL(req.url ?? '/', 'http://inspector');
    const handle = async (): Promise<void> => {
      if (url.pathname === '/api' || url.pathname.startsWith('/api/')) {
        // Every API call, GET too: a read can be made expensive, and the answers hold captured secrets.
        const refusal = crossOriginRefusal(req.headers);
        if (refusal !== undefined) throw new InspectorError(InspectorErrorCode.FORBIDDEN_ORIGIN, refusal);
        await routeApi(ctx, req, res, url);
        return;
      }
      if (
        (req.method === 'GET' || req.method === 'HEAD') &&
        (await serveStatic(ctx.staticDir, url.pathname, res))
      ) {
        return;
      }
      throw new InspectorError(InspectorErrorCode.NOT_FOUND, `nothing at ${url.pathname}`);
    };
    handle().catch((err: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      sendError(res, asInspectorError(err));
    });
  };
}
