import { brotliDecompressSync, gunzipSync, inflateRawSync, inflateSync } from 'node:zlib';

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
        return gunzipSync(bytes, options);
      case 'br':
        return brotliDecompressSync(bytes, options);
      case 'deflate':
        // "deflate" is meant to be zlib-wrapped; some servers send it raw.
        try {
          return inflateSync(bytes, options);
        } catch {
          return inflateRawSync(bytes, options);
        }
      default:
        return undefined;
    }
  } catch {
    return undefined;
  }
}
