import type { ClientRequest } from 'node:http';
import type { ClientHttp2Stream } from 'node:http2';
import type { ConnectionOptions } from 'node:tls';
import { withoutHopByHop } from '@tunnel2/protocol';
import type { EntryError } from '../entries/entry.js';
import type { StoredEntry } from '../entries/stored-entry.js';
import { InspectorError, InspectorErrorCode } from '../errors.js';
import { ExchangeRecorder } from './capture.js';
import type { EntryStore } from './entry-store.js';
import { sendOverH2 } from './replay-h2.js';

// Not an `import`: an ESM import of node:http also loads Node's bundled undici (README.md, "Development").
const { request: httpRequest } = process.getBuiltinModule('node:http');

/** The local target replays go to (not through the tunnel). */
export interface ReplayTarget {
  /** `http://host:port` */
  origin: string;
  /** A path prefix the agent adds to every request target ('' when none). */
  basePath: string;
  /**
   * The agent's own forwarding of a request head (hop-by-hop fields out, Host as its --host-header says), so a
   * replay reaches the target as the tunnelled request did. Default: hop-by-hop fields, Expect and Host out,
   * then Host set to the target's.
   */
  forwardHeaders?: (raw: string[]) => string[];
  /**
   * An https:// target's TLS options for a replay of this forwarded head (certificate checks and SNI as the
   * agent's own requests have them: --insecure, --ca). Default: Node's (verified against bundled CAs).
   */
  tlsOptions?: (forwarded: string[]) => ConnectionOptions;
  /**
   * The agent's own HTTP/2 way to the target (`--h2c`, or h2 chosen by ALPN), when it has one: opens a
   * stream for the replayed request on the agent's pool of sessions (its head sent, the body to follow), or
   * resolves undefined when the target turned out to speak HTTP/1.1 (ALPN chose it). A replay then goes
   * as the original request went: an h2c-only gRPC server cannot answer one over HTTP/1.1. Without it,
   * replays go over HTTP/1.1.
   */
  h2Stream?: (request: ReplayRequest) => Promise<ClientHttp2Stream | undefined>;
}

/** A replayed request as it goes to the target: its head forwarded as the agent forwards, the base path added. */
export interface ReplayRequest {
  method: string;
  /** The base path and the request target. */
  path: string;
  /** Flat name, value, ... with Host (as the agent forwards it) and the replayed body's Content-Length. */
  headers: string[];
}

export interface ReplayEdits {
  method?: string;
  path?: string;
  headers?: [string, string][];
  bodyBase64?: string;
}

/** The framing, which the replayed body sets anew (hop-by-hop fields are gone already). */
const REFRAMED = new Set(['content-length', 'transfer-encoding', 'expect']);

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** The target sent nothing (no head, no body bytes) for this long: the replay is given up. */
export const REPLAY_IDLE_TIMEOUT_MS = 30_000;

/** Validates the edits a client sent (the JSON body of `POST /api/entries/:id/replay`). */
export function parseEdits(value: unknown): ReplayEdits {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw bad('the body must be a JSON object');
  const v = value as Record<string, unknown>;
  const edits: ReplayEdits = {};
  if (v.method !== undefined) {
    if (typeof v.method !== 'string' || !TOKEN.test(v.method)) throw bad('method: an HTTP method token');
    edits.method = v.method;
  }
  if (v.path !== undefined) {
    if (typeof v.path !== 'string' || !/^\/[\x21-\x7e]*$/.test(v.path)) {
      throw bad('path: starts with / and holds visible ASCII only');
    }
    edits.path = v.path;
  }
  if (v.headers !== undefined) {
    const ok =
      Array.isArray(v.headers) &&
      v.headers.every(
        (h: unknown) =>
          Array.isArray(h) &&
          h.length === 2 &&
          typeof h[0] === 'string' &&
          TOKEN.test(h[0]) &&
          typeof h[1] === 'string' &&
          !/[\r\n\0]/.test(h[1]),
      );
    if (!ok) throw bad('headers: [name, value] pairs of a field name and a value without CR, LF or NUL');
    edits.headers = v.headers as [string, string][];
  }
  if (v.bodyBase64 !== undefined) {
    if (typeof v.bodyBase64 !== 'string') throw bad('bodyBase64: a base64 string');
    edits.bodyBase64 = v.bodyBase64;
  }
  return edits;
}

function bad(message: string): InspectorError {
  return new InspectorError(InspectorErrorCode.BAD_REQUEST, message);
}

/** The head the target receives for a request head received (the agent's forwarding, else the default). */
export function forwardOf(target: ReplayTarget): (raw: string[]) => string[] {
  return target.forwardHeaders ?? defaultForward(new URL(target.origin));
}

function defaultForward(origin: URL): (raw: string[]) => string[] {
  return (raw) => {
    const out = ['Host', origin.host];
    const headers = withoutHopByHop(raw);
    for (let i = 0; i + 1 < headers.length; i += 2) {
      const lower = headers[i]!.toLowerCase();
      if (lower !== 'host' && lower !== 'expect') out.push(headers[i]!, headers[i + 1]!);
    }
    return out;
  };
}

/** The request a replay sends: the original's or the edits', its head forwarded as the agent forwards. */
function replayedRequest(
  original: StoredEntry,
  edits: ReplayEdits,
  target: ReplayTarget,
  origin: URL,
): { method: string; path: string; headers: string[]; body: Buffer } {
  if (edits.bodyBase64 === undefined && original.request.truncated) {
    // Sending the kept part as if whole would answer 200 to a request nobody made.
    throw bad(
      `captured ${original.request.captured} of ${original.request.size} bytes; send bodyBase64 to replay it`,
    );
  }
  const method = edits.method ?? original.method;
  const body =
    edits.bodyBase64 !== undefined ? Buffer.from(edits.bodyBase64, 'base64') : original.request.bytes();
  const source = edits.headers?.flat() ?? [...original.requestHeaders];
  const forwarded = (target.forwardHeaders ?? defaultForward(origin))(source);
  const headers: string[] = [];
  for (let i = 0; i + 1 < forwarded.length; i += 2) {
    if (!REFRAMED.has(forwarded[i]!.toLowerCase())) headers.push(forwarded[i]!, forwarded[i + 1]!);
  }
  if (body.length > 0 || !['GET', 'HEAD', 'DELETE', 'OPTIONS'].includes(method)) {
    headers.push('Content-Length', String(body.length));
  }
  return { method, path: edits.path ?? original.target, headers, body };
}

/**
 * Sends an entry's request (with edits) straight to the local target and records the exchange as a new
 * entry with `replayOf`: over the agent's HTTP/2 path when the target speaks HTTP/2 (ReplayTarget.h2Stream),
 * else over HTTP/1.1. Resolves with it once the response ended or failed (the failure is in the entry);
 * the response streams into the capture (kept up to the body limit), never buffered whole. `signal` cancels
 * it (the API client went away, the inspector closes); a target silent for 30 s ends it too.
 */
export async function replay(
  original: StoredEntry,
  edits: ReplayEdits,
  target: ReplayTarget,
  store: EntryStore,
  bodyLimit: number,
  signal: AbortSignal,
): Promise<StoredEntry> {
  const origin = new URL(target.origin);
  const { method, path, headers, body } = replayedRequest(original, edits, target, origin);
  if (signal.aborted) throw new InspectorError(InspectorErrorCode.REPLAY_FAILED, 'replay cancelled');
  const recorder = new ExchangeRecorder(
    store,
    { method, target: path, headers, clientAddress: 'replay', replayOf: original.id },
    bodyLimit,
  );
  if (body.length > 0) recorder.requestData(body);
  let failure: EntryError | undefined;
  let stream: ClientHttp2Stream | undefined;
  try {
    stream = await target.h2Stream?.({ method, path: target.basePath + path, headers });
  } catch (err) {
    // The agent's dial failed (the target is down): an entry with the failure, as over HTTP/1.1.
    failure = { code: 'replay_failed', message: (err as Error).message };
  }
  if (failure === undefined) {
    failure =
      stream !== undefined
        ? await sendOverH2(stream, body, recorder, signal, REPLAY_IDLE_TIMEOUT_MS)
        : await sendOverHttp1(origin, target, { method, path, headers, body }, recorder, signal);
  }
  const entry = store.get(recorder.finish(failure) ?? '');
  if (entry !== undefined) return entry;
  throw new InspectorError(InspectorErrorCode.REPLAY_FAILED, 'the replay exceeded the budget: not kept');
}

/** The replay over HTTP/1.1 (node:http, node:https): resolves with why it ended early, if it did. */
function sendOverHttp1(
  origin: URL,
  target: ReplayTarget,
  { method, path, headers, body }: { method: string; path: string; headers: string[]; body: Buffer },
  recorder: ExchangeRecorder,
  signal: AbortSignal,
): Promise<EntryError | undefined> {
  return new Promise((resolve, reject) => {
    /** Why it ended early, when it did: set before the request is destroyed. */
    let failure: EntryError | undefined;
    let done = false;
    const settle = (error: EntryError | undefined): void => {
      if (done) return;
      done = true;
      signal.removeEventListener('abort', onAbort);
      resolve(error);
    };
    const stop = (error: EntryError): void => {
      failure ??= error;
      req.destroy(new Error(error.message));
    };
    const onAbort = (): void => stop({ code: 'replay_cancelled', message: 'replay cancelled' });
    let req: ClientRequest;
    try {
      // node:https (and with it node:tls) is loaded by the first replay to an https:// target only.
      const request =
        origin.protocol === 'https:' ? process.getBuiltinModule('node:https').request : httpRequest;
      req = request({
        ...(origin.protocol === 'https:' ? target.tlsOptions?.(headers) : undefined),
        hostname: origin.hostname.replace(/^\[|\]$/g, ''),
        port: origin.port,
        method,
        path: target.basePath + path,
        headers,
        setHost: false,
        agent: false,
        // An idle timeout on the socket: it covers the wait for the head and every gap in the body.
        timeout: REPLAY_IDLE_TIMEOUT_MS,
      });
    } catch (err) {
      recorder.finish({ code: 'replay_failed', message: String(err) });
      reject(new InspectorError(InspectorErrorCode.REPLAY_FAILED, String(err), { cause: err }));
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    req.on('timeout', () =>
      stop({
        code: 'replay_timeout',
        message: `the local target sent nothing for ${REPLAY_IDLE_TIMEOUT_MS / 1000} s`,
      }),
    );
    req.on('response', (res) => {
      recorder.responseHead(res.statusCode ?? 0, res.rawHeaders, undefined, res.statusMessage);
      res.on('data', (chunk: Buffer) => recorder.responseData(chunk));
      res.on('error', () => {});
      res.on('close', () =>
        settle(
          res.complete
            ? undefined
            : (failure ?? { code: 'response_aborted', message: 'the response ended early' }),
        ),
      );
    });
    req.on('error', (err) => settle(failure ?? { code: 'replay_failed', message: err.message }));
    req.end(body);
  });
}
