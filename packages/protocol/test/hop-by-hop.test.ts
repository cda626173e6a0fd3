import { describe, expect, it } from 'vitest';
import { withoutHopByHop } from '../src/index.js';

describe('withoutHopByHop', () => {
  it('drops connection-specific fields and keeps the rest in order with case and repeats', () => {
    // biome-ignore format: one name/value pair per line
    const raw = [
      'Host', 'a.example',
      'Connection', 'keep-alive, X-Secret',
      'Keep-Alive', 'timeout=5',
      'Set-Cookie', 'a=1',
      'x-secret', 'hidden',
      'Transfer-Encoding', 'chunked',
      'TE', 'trailers',
      'Upgrade', 'websocket',
      'Proxy-Connection', 'keep-alive',
      'Trailer', 'X-Sum',
      'set-cookie', 'b=2',
    ];
    expect(withoutHopByHop(raw)).toEqual(['Host', 'a.example', 'Set-Cookie', 'a=1', 'set-cookie', 'b=2']);
  });

  it('handles every name listed in repeated Connection headers', () => {
    const raw = ['connection', 'x-a', 'CONNECTION', ' X-B ,, ', 'X-A', '1', 'x-b', '2', 'x-c', '3'];
    expect(withoutHopByHop(raw)).toEqual(['x-c', '3']);
  });

  it('drops the fixed names in any case without a Connection field, and keeps names of the same lengths', () => {
    // biome-ignore format: one name/value pair per line
    const raw = [
      'TE', 'trailers',
      'UPGRADE', 'h2c',
      'tRAILER', 'X-Sum',
      'KEEP-ALIVE', 'timeout=5',
      'Proxy-CONNECTION', 'close',
      'TRANSFER-ENCODING', 'chunked',
      'X-', '2',
      'Referer', 'seven',
      'User-Agent', 'ten',
      'X-Forwarded-For1', 'sixteen',
      'X-Content-Options', 'seventeen',
    ];
    expect(withoutHopByHop(raw)).toEqual(raw.slice(12));
  });

  it('returns a copy', () => {
    const raw = ['A', '1'];
    const out = withoutHopByHop(raw);
    expect(out).toEqual(raw);
    expect(out).not.toBe(raw);
  });
});
