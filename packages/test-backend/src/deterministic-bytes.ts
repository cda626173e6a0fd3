import { createHash } from 'node:crypto';

export const BYTES_CHUNK_SIZE = 64 * 1024;

/**
 * The 64 KiB pattern every /bytes body is cut from: pseudo-random (xorshift) so compression or a
 * repeated-chunk bug cannot pass for a correct transfer, and computed once.
 */
const pattern: Buffer = (() => {
  const out = Buffer.allocUnsafe(BYTES_CHUNK_SIZE + 251);
  let x = 0x9e3779b9;
  for (let i = 0; i < out.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
})();

/**
 * The chunk at `offset` of a deterministic stream of bytes. Successive chunks start at a shifting
 * position of the pattern (offset / 64 KiB mod 251), so no two neighbouring chunks are equal.
 */
export function chunkAt(offset: number, size: number): Buffer {
  const index = Math.floor(offset / BYTES_CHUNK_SIZE);
  const start = (index % 251) + (offset % BYTES_CHUNK_SIZE);
  return pattern.subarray(start, start + size);
}

/** Yields `n` deterministic bytes in chunks of at most 64 KiB, never holding more than one chunk. */
export function* deterministicChunks(n: number): Generator<Buffer> {
  for (let offset = 0; offset < n; ) {
    const size = Math.min(BYTES_CHUNK_SIZE - (offset % BYTES_CHUNK_SIZE), n - offset);
    yield chunkAt(offset, size);
    offset += size;
  }
}

/** The SHA-256 (hex) of the first `n` deterministic bytes, computed chunk by chunk. */
export function deterministicSha256(n: number): string {
  const hash = createHash('sha256');
  for (const chunk of deterministicChunks(n)) hash.update(chunk);
  return hash.digest('hex');
}
