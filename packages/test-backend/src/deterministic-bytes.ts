import { createHash } from 'node:crypto';
import { invalidArgument } from './errors.js';

/** Size of the chunks /bytes is generated and written in. */
export const BYTES_CHUNK_SIZE = 64 * 1024;

// Chunk i is cut from this pattern starting at i mod 251: neighbouring chunks differ (a duplicated,
// dropped or reordered chunk changes the hash), and the sequence repeats only every 251 chunks (~15.7 MiB).
const PATTERN_SHIFTS = 251;

/**
 * Pseudo-random bytes (xorshift32) computed once at load: serving a chunk is then a zero-copy view, so
 * /bytes costs the backend nothing per byte, and compression cannot make a broken transfer look right.
 */
const pattern: Buffer = (() => {
  const out = Buffer.allocUnsafe(BYTES_CHUNK_SIZE + PATTERN_SHIFTS);
  let x = 0x9e3779b9;
  for (let i = 0; i < out.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
})();

function checkLength(n: number): void {
  if (!Number.isSafeInteger(n) || n < 0) {
    throw invalidArgument(`a byte count must be a non-negative safe integer, got ${n}`);
  }
}

/**
 * Yields the first `n` deterministic bytes in chunks of at most 64 KiB (aligned to 64 KiB offsets).
 * The chunks are read-only views of one shared buffer: never write to them; nothing of size `n` is
 * ever allocated, so `n` may be far beyond what fits in memory.
 */
export function deterministicChunks(n: number): Generator<Buffer, void, undefined> {
  // Checked here, not inside the generator, so a bad count throws at the call rather than at first use.
  checkLength(n);
  return generateChunks(n);
}

function* generateChunks(n: number): Generator<Buffer, void, undefined> {
  for (let offset = 0, index = 0; offset < n; offset += BYTES_CHUNK_SIZE, index++) {
    const start = index % PATTERN_SHIFTS;
    yield pattern.subarray(start, start + Math.min(BYTES_CHUNK_SIZE, n - offset));
  }
}

/** The SHA-256 (hex) of the first `n` deterministic bytes, computed chunk by chunk in constant memory. */
export function deterministicSha256(n: number): string {
  const hash = createHash('sha256');
  for (const chunk of deterministicChunks(n)) hash.update(chunk);
  return hash.digest('hex');
}
