import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLineWriter } from '../src/line-writer.js';

function sink(): { stream: NodeJS.WritableStream; writes: string[] } {
  const writes: string[] = [];
  const stream = {
    write: (text: string) => {
      writes.push(text);
      return true;
    },
  } as unknown as NodeJS.WritableStream;
  return { stream, writes };
}

describe('createLineWriter', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('writes status lines at the end of the turn, in order with request lines pending before them', () => {
    const { stream, writes } = sink();
    const out = createLineWriter(stream, { batchMs: 50 });
    out.writeBatched('request 1\n');
    out.write('ready\n');
    out.writeBatched('request 2\n');
    expect(writes).toEqual([]);
    vi.advanceTimersToNextTimer(); // the immediate
    expect(writes).toEqual(['request 1\nready\nrequest 2\n']);
    vi.advanceTimersByTime(100);
    expect(writes).toHaveLength(1);
  });

  it('batches request lines into one write per window', () => {
    const { stream, writes } = sink();
    const out = createLineWriter(stream, { batchMs: 50 });
    for (let i = 0; i < 100; i++) out.writeBatched(`request ${i}\n`);
    vi.advanceTimersByTime(49);
    expect(writes).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(writes).toHaveLength(1);
    expect(writes[0]!.split('\n')).toHaveLength(101);
    out.writeBatched('request 100\n');
    vi.advanceTimersByTime(50);
    expect(writes).toEqual([expect.any(String), 'request 100\n']);
  });

  it('writes at once when the pending text reaches its bound, and flush() writes what is left', () => {
    const { stream, writes } = sink();
    const out = createLineWriter(stream, { batchMs: 50, maxPendingChars: 20 });
    out.writeBatched('0123456789\n');
    expect(writes).toEqual([]);
    out.writeBatched('0123456789\n');
    expect(writes).toEqual(['0123456789\n0123456789\n']);
    out.writeBatched('last\n');
    out.flush();
    expect(writes).toEqual(['0123456789\n0123456789\n', 'last\n']);
    vi.advanceTimersByTime(100);
    expect(writes).toHaveLength(2);
  });
});
