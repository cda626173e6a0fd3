import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLineWriter } from '../src/terminal/line-writer.js';

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

/** A stream whose reader stopped: every write returns false until the test emits 'drain'. */
function stuck(): { stream: NodeJS.WritableStream & EventEmitter; writes: string[]; drain: () => void } {
  const writes: string[] = [];
  let full = true;
  const stream = Object.assign(new EventEmitter(), {
    write: (text: string) => {
      writes.push(text);
      return !full;
    },
  }) as unknown as NodeJS.WritableStream & EventEmitter;
  return {
    stream,
    writes,
    drain: () => {
      full = false;
      stream.emit('drain');
      full = true;
    },
  };
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

  // Issue #29, 8: a stdout that is never read grew the agent by 0.93 KB per request, without bound.
  it('while stdout does not drain, holds request lines up to the bound, then drops and counts them', () => {
    const { stream, writes, drain } = stuck();
    const out = createLineWriter(stream, { batchMs: 50, maxPendingChars: 1000, maxHeldChars: 100 });
    out.writeBatched('first\n');
    vi.advanceTimersByTime(50);
    expect(writes).toEqual(['first\n']); // returned false: stdout is full from now on
    let peak = 0;
    for (let i = 0; i < 10_000; i++) {
      out.writeBatched(`request ${String(i).padStart(5, '0')}\n`); // 14 characters
      vi.advanceTimersByTime(1);
      peak = Math.max(peak, out.pendingChars);
    }
    expect(writes).toHaveLength(1);
    expect(peak).toBeLessThanOrEqual(1000);
    const held = Math.floor(1000 / 14);
    expect(out.dropped).toBe(10_000 - held);
    drain();
    expect(writes).toHaveLength(2);
    const lines = writes[1]!.split('\n').slice(0, -1);
    expect(lines).toHaveLength(held + 1);
    expect(lines[0]).toBe('request 00000');
    expect(lines[held - 1]).toBe(`request ${String(held - 1).padStart(5, '0')}`);
    expect(lines[held]).toBe(`tunnel2: ${10_000 - held} lines dropped while stdout was not read`);
    expect(out.dropped).toBe(0);
    expect(out.pendingChars).toBe(0);
  });

  it('keeps ready, error and closed lines apart from the request lines it drops, in their bound', () => {
    const { stream, writes, drain } = stuck();
    const out = createLineWriter(stream, {
      maxPendingChars: 100,
      maxHeldChars: 30,
      droppedLine: (count) => `dropped ${count}\n`,
    });
    out.write('ready\n');
    vi.advanceTimersToNextTimer();
    expect(writes).toEqual(['ready\n']);
    for (let i = 0; i < 1000; i++) out.writeBatched('request ........ line\n');
    out.write('error: one\n');
    out.write('error: two\n');
    out.write('error: three\n'); // past the 30 characters held for them: dropped too
    out.write('closed\n'); // fits again
    vi.advanceTimersByTime(1000);
    expect(out.pendingChars).toBeLessThanOrEqual(130);
    drain();
    const text = writes[1]!;
    // 4 request lines held (88 characters), 996 dropped, and one error line.
    expect(text).toBe(`${'request ........ line\n'.repeat(4)}error: one\nerror: two\nclosed\ndropped 997\n`);
  });

  it('flush() before exit writes what is held, and the count of what was not, even if stdout never drained', () => {
    const { stream, writes } = stuck();
    const out = createLineWriter(stream, {
      maxPendingChars: 10,
      droppedLine: (count) => `dropped ${count}\n`,
    });
    out.write('ready\n');
    vi.advanceTimersToNextTimer();
    out.writeBatched('request\n');
    out.writeBatched('request\n');
    out.write('closed\n');
    out.flush();
    expect(writes).toEqual(['ready\n', 'request\nclosed\ndropped 1\n']);
  });

  it('close(): nothing more is written, and one line says why', () => {
    const { stream, writes } = sink();
    const warnings: string[] = [];
    const out = createLineWriter(stream, { warn: (line) => void warnings.push(line) });
    out.writeBatched('request\n');
    out.close('EPIPE');
    out.close('EPIPE');
    out.write('ready\n');
    out.writeBatched('request\n');
    out.flush();
    vi.advanceTimersByTime(1000);
    expect(writes).toEqual([]);
    expect(warnings).toEqual([
      'tunnel2: stdout was closed (EPIPE); no more lines are written there, the tunnel keeps serving\n',
    ]);
  });
});
