import type { OutgoingHttpHeaders } from 'node:http2';

// The fields of a head or trailers the HTTP/2 ingress writes, in Node's http2 object form: what HTTP/2
// forbids dropped first (Node's http2 throws on those), repeated fields kept as separate fields.

/** Fields HTTP/2 forbids (RFC 9113 §8.2.2): Node's http2 throws on them, so they are dropped first. */
const connectionSpecific: ReadonlySet<string> = new Set([
  'connection',
  'proxy-connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'te',
  'host',
  'http2-settings',
]);

/** Pairs or a flat list of fields, minus those HTTP/2 forbids, added to `out` (Node's http2 object form). */
export function h2Fields(
  fields: readonly string[] | OutgoingHttpHeaders | undefined,
  out: OutgoingHttpHeaders = {},
): OutgoingHttpHeaders {
  if (fields === undefined) return out;
  if (!Array.isArray(fields)) {
    for (const [name, value] of Object.entries(fields)) {
      const lower = name.toLowerCase();
      if (!connectionSpecific.has(lower) && value !== undefined) out[lower] = value;
    }
    return out;
  }
  for (let i = 0; i < fields.length; i += 2) {
    const name = (fields[i] as string).toLowerCase();
    if (connectionSpecific.has(name) || name.charCodeAt(0) === 58) continue;
    const value = fields[i + 1] as string;
    const existing = out[name];
    // Repeated fields stay separate fields (Set-Cookie must), never joined.
    out[name] =
      existing === undefined
        ? value
        : Array.isArray(existing)
          ? [...existing, value]
          : [String(existing), value];
  }
  return out;
}
