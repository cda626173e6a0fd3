import { describe, expect, it } from 'vitest';
import { BYTES_CHUNK_SIZE, deterministicChunks, deterministicSha256 } from '../src/index.js';
import { sha256 } from './support/http.js';

describe('deterministic bytes', () => {
  it('yields exactly n bytes in chunks of at most 64 KiB', () => {
    for (const n of [
      0,
      1,
      BYTES_CHUNK_SIZE - 1,
      BYTES_CHUNK_SIZE,
      BYTES_CHUNK_SIZE + 1,
      3 * BYTES_CHUNK_SIZE + 7,
    ]) {
      const chunks = [...deterministicChunks(n)];
      expect(chunks.every((c) => c.length > 0 && c.length <= BYTES_CHUNK_SIZE)).toBe(true);
      expect(Buffer.concat(chunks).length).toBe(n);
    }
  });

  it('is deterministic, and a shorter stream is a prefix of a longer one', () => {
    const long = Buffer.concat([...deterministicChunks(200_000)]);
    expect(Buffer.concat([...deterministicChunks(200_000)]).equals(long)).toBe(true);
    expect(Buffer.concat([...deterministicChunks(100_001)]).equals(long.subarray(0, 100_001))).toBe(true);
  });

  it('never repeats a chunk next to itself, and looks random', () => {
    const chunks = [...deterministicChunks(300 * BYTES_CHUNK_SIZE)];
    for (let i = 1; i < chunks.length; i++) expect(chunks[i]!.equals(chunks[i - 1]!)).toBe(false);
    const counts = new Array<number>(256).fill(0);
    for (const byte of chunks[0]!) counts[byte]!++;
    // Every byte value appears, none dominates (a constant or counting pattern would fail this).
    expect(Math.min(...counts)).toBeGreaterThan(0);
    expect(Math.max(...counts)).toBeLessThan((BYTES_CHUNK_SIZE / 256) * 2);
  });

  it('hashes the same bytes it yields', () => {
    for (const n of [0, 1, 65_537, 1_000_000]) {
      expect(deterministicSha256(n)).toBe(sha256(Buffer.concat([...deterministicChunks(n)])));
    }
    expect(deterministicSha256(0)).toBe(sha256(''));
  });

  it('generates lazily: 2^31 bytes cost nothing until iterated', () => {
    const chunks = deterministicChunks(2 ** 31);
    expect(chunks.next().value).toHaveLength(BYTES_CHUNK_SIZE);
    let count = 1;
    for (const chunk of chunks) {
      count++;
      expect(chunk.length).toBe(BYTES_CHUNK_SIZE);
      if (count === 1_000) break;
    }
    expect(count).toBe(1_000);
  });

  it('refuses a count that is not a non-negative safe integer, with a stable code', () => {
    for (const n of [-1, 1.5, Number.NaN, 2 ** 53]) {
      expect(() => deterministicChunks(n)).toThrow(
        expect.objectContaining({ code: 'TUNNEL2_ERR_TEST_BACKEND_INVALID_ARGUMENT' }),
      );
    }
  });
});
