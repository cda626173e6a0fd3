// node:zlib is loaded on the first compressed body, not with the agent: an idle agent never needs it.
const zlib = (): typeof import('node:zlib') => process.getBuiltinModule('node:zlib');

/**
 * The decoded bytes of a body sent with a Content-Encoding of gzip, br or deflate, or undefined when it has
 * another one, does not decode (a truncated capture usually does not) or would grow past `maxBytes` (a small
 * compressed body can expand without bound: zlib stops at the cap, so the work done is bounded by it too).
 */
export function decodeBody(bytes: Buffer, encoding: string, maxBytes: number): Buffer | undefined {
  const options = { maxOutputLength: maxBytes };
  try {
    switch (encoding.trim().toLowerCase()) {
      case 'gzip':
      case 'x-gzip':
        return zlib().gunzipSync(bytes, options);
      case 'br':
        return zlib().brotliDecompressSync(bytes, options);
      case 'deflate':
        // "deflate" is meant to be zlib-wrapped; some servers send it raw.
        try {
          return zlib().inflateSync(bytes, options);
        } catch {
          return zlib().inflateRawSync(bytes, options);
        }
      default:
        return undefined;
    }
  } catch {
    return undefined;
  }
}
