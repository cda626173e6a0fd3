import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { dropHopByHop, isFieldName, isHopByHopName, type RawHeaders, withoutHopByHop } from '../src/index.js';

// What withoutHopByHop meant before it compared names in place (a lowercase copy of every name): the
// definition the in-place comparison must keep, byte for byte.
const hopByHop = new Set([
  'connection',
  'proxy-connection',
  'keep-alive',
  'te',
  'transfer-encoding',
  'upgrade',
  'trailer',
]);
function byLowercaseCopies(raw: RawHeaders): RawHeaders {
  const named = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() !== 'connection') continue;
    for (const token of raw[i + 1]!.split(','))
      if (token.trim() !== '') named.add(token.trim().toLowerCase());
  }
  const out: RawHeaders = [];
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i]!.toLowerCase();
    if (!hopByHop.has(lower) && !named.has(lower)) out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}

/** Names near the hop-by-hop ones: their letters in any case, a neighbour of a letter, latin1 beyond ASCII. */
const latin1Name = fc.oneof(
  fc.constantFrom(...hopByHop, 'host', 'x-a', 'X-A', 'x-b', 'close', 'Keep-Alive', 'TE', 'tE', 'Te'),
  fc
    .tuple(fc.constantFrom(...hopByHop, 'x-a', 'close'), fc.array(fc.boolean(), { maxLength: 20 }))
    .map(([name, upper]) => [...name].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join('')),
  fc.string({
    unit: fc.constantFrom(...'aAeEkK-@[`{^~\xc0\xe0\xc5\xe5\xff\xb5'),
    minLength: 1,
    maxLength: 17,
  }),
);
const value = fc.oneof(
  fc.constantFrom('keep-alive', 'close', 'X-A, x-b', ' TE ,, Upgrade', 'keep-alive, \xc0x'),
  fc.string({ unit: fc.constantFrom(...'aAkK-, \xc0\xe0'), maxLength: 20 }),
);

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

describe('names compared in place', () => {
  it('isFieldName is toLowerCase equality for latin1 names', () => {
    fc.assert(
      fc.property(latin1Name, latin1Name, (name, other) => {
        const lower = other.toLowerCase();
        expect(isFieldName(name, lower)).toBe(name.toLowerCase() === lower);
      }),
      { numRuns: 2000 },
    );
  });

  it('isFieldName is toLowerCase equality for every pair of latin1 code units, at every place of a name', () => {
    // Random names rarely pair a code unit with its other case: every pair, first, middle and last, so the
    // ASCII fast path and the fallback beyond 0x7f (0xC0-0xDE against 0xE0-0xFE, 0xD7 and 0xF7, 0xFF) both
    // answer as toLowerCase does in either direction.
    const mismatches: string[] = [];
    for (let c = 0; c <= 0xff; c++) {
      for (let l = 0; l <= 0xff; l++) {
        const lowerUnit = String.fromCharCode(l).toLowerCase();
        const unit = String.fromCharCode(c);
        for (const [name, lower] of [
          [unit, lowerUnit],
          [`${unit}-a`, `${lowerUnit}-a`],
          [`a${unit}a`, `a${lowerUnit}a`],
          [`a-${unit}`, `a-${lowerUnit}`],
        ] as const) {
          if (isFieldName(name, lower) !== (name.toLowerCase() === lower)) mismatches.push(`${c}/${l}`);
        }
      }
    }
    expect(mismatches).toEqual([]);
  });

  it('isHopByHopName is the hop-by-hop set, whatever the case', () => {
    fc.assert(
      fc.property(latin1Name, (name) => {
        expect(isHopByHopName(name)).toBe(hopByHop.has(name.toLowerCase()));
      }),
      { numRuns: 2000 },
    );
  });

  it('withoutHopByHop keeps exactly what lowercase copies kept, Connection options included', () => {
    const pairs = fc.array(fc.tuple(latin1Name, value), { maxLength: 14 });
    fc.assert(
      fc.property(pairs, (list) => {
        const raw = list.flat();
        expect(withoutHopByHop(raw)).toEqual(byLowercaseCopies(raw));
      }),
      { numRuns: 2000 },
    );
    // More than eight listed names: looked up through one lowercase copy each.
    const many = Array.from({ length: 10 }, (_, i) => `X-O${i}`).join(', ');
    const raw = ['Connection', many, 'x-o3', '1', 'X-O9', '2', 'X-O10', '3', 'X-P', '4'];
    expect(withoutHopByHop(raw)).toEqual(byLowercaseCopies(raw));
    expect(withoutHopByHop(raw)).toEqual(['X-O10', '3', 'X-P', '4']);
  });
});

describe('dropHopByHop', () => {
  it('leaves in the list itself exactly what withoutHopByHop copies', () => {
    const pairs = fc.array(fc.tuple(latin1Name, value), { maxLength: 14 });
    fc.assert(
      fc.property(pairs, (list) => {
        const raw = list.flat();
        const expected = withoutHopByHop(raw);
        const same = dropHopByHop(raw);
        expect(same).toBe(raw);
        expect(raw).toEqual(expected);
      }),
      { numRuns: 2000 },
    );
  });

  it('keeps a list without hop-by-hop fields as it is', () => {
    const raw = ['Content-Type', 'text/plain', 'Content-Length', '2', 'Date', 'x'];
    expect(dropHopByHop(raw)).toEqual(['Content-Type', 'text/plain', 'Content-Length', '2', 'Date', 'x']);
    expect(dropHopByHop(['Connection', 'x-a', 'X-A', '1', 'Keep-Alive', 't', 'X-B', '2'])).toEqual([
      'X-B',
      '2',
    ]);
  });
});
