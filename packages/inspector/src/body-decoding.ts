import { brotliDecompressSync, gunzipSync, inflateRawSync, inflateSync } from 'node:zlib';

/** A decoded body never grows past this (a small compressed body can expand without bound). */
const MAX_DECODED = 16 * 1024 * 1024;

/**
 * The decoded bytes of a body sent with a Content-Encoding of gzip, br or deflate, or undefined when
 * it has none, another one, or does not decode (a truncated capture usually does not).
 */
export function decodeBody(bytes: Buffer, encoding: string | null | undefined): Buffer | undefined {
  if (encoding === null || encoding === undefined) return undefined;
  const options = { maxOutputLength: MAX_DECODED };
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
