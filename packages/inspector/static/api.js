// The inspector's HTTP API (packages/inspector/README.md): the only thing the page talks to.

/** An API failure with the server's stable code (TUNNEL2_ERR_INSPECTOR_*), shown as is to the user. */
export class ApiError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

async function call(path, init = {}) {
  const res = await fetch(path, init);
  const type = res.headers.get('content-type') ?? '';
  if (!res.ok) {
    const body = type.includes('json') ? await res.json() : { error: { code: String(res.status) } };
    throw new ApiError(body.error?.code ?? String(res.status), body.error?.message ?? res.statusText);
  }
  return type.includes('json') ? res.json() : res.text();
}

function postJson(path, body, method = 'POST') {
  return call(path, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

export const api = {
  status: () => call('/api/status'),
  /** `filter`: { method, status, path, header, body } (empty ones left out), newest first. */
  list(filter, limit = 1000) {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(filter)) if (value !== '') params.set(key, value);
    params.set('limit', String(limit));
    return call(`/api/entries?${params}`);
  },
  /** The newest 100 exchanges still running, newest first (`{ exchanges, total }`). */
  inflight: () => call('/api/inflight'),
  entry: (id) => call(`/api/entries/${encodeURIComponent(id)}`),
  replay: (id, edits) => postJson(`/api/entries/${encodeURIComponent(id)}/replay`, edits),
  curl: (id) => call(`/api/entries/${encodeURIComponent(id)}/curl`),
  /** `{ request, response }`: each message as HTTP/1.1 text, as it crossed its hop. */
  raw: (id) => call(`/api/entries/${encodeURIComponent(id)}/raw`),
  clear: () => call('/api/entries', { method: 'DELETE' }),
  setPaused: (paused) => postJson('/api/capture', { paused }),
  harUrl(ids, redact) {
    const params = new URLSearchParams();
    if (ids !== undefined) params.set('ids', ids.join(','));
    if (redact) params.set('redact', '1');
    const query = params.toString();
    return query === '' ? '/api/har' : `/api/har?${query}`;
  },
};

/** A tunnel name or an entry id as a file name may hold it (as src/har-file-name.ts does). */
function safePart(text, fallback) {
  const safe = text.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 63);
  return safe.replace(/^\.+/, '') || fallback;
}

/**
 * A HAR export's file name, the one the server gives in Content-Disposition (src/har-file-name.ts):
 * `tunnel2-<name>-<id | all | n-entries>-<UTC YYYYMMDD-HHMMSS>.har`.
 */
export function harFileName(name, ids, at = new Date()) {
  const which =
    ids === undefined || ids.length === 0
      ? 'all'
      : ids.length === 1
        ? safePart(ids[0], 'entry')
        : `${ids.length}-entries`;
  const stamp = at.toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  return `tunnel2-${safePart(name ?? '', 'tunnel')}-${which}-${stamp}.har`;
}

/** Base64 (as the API sends bodies) to bytes. */
export function fromBase64(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** Bytes to base64, in slices so a large body does not overflow the argument list. */
export function toBase64(bytes) {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}
