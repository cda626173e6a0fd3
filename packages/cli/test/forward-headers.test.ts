import { type RawHeaders, withoutHopByHop } from '@tunnel2/protocol';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { forwardHeaders, responseFields } from '../src/forwarding/forward-headers.js';
import type { HostHeaderMode } from '../src/forwarding/forward-options.js';
import { parseTarget } from '../src/forwarding/target.js';

// The head the backend is sent, built in one pass from the decoded request head (issue #34: fewer copies per
// request). It must be what the two passes before it built: hop-by-hop fields out (Connection's options
// too), Expect out, Host in front as the mode says, everything else in order with its case and repeats.

const target = parseTarget('http://127.0.0.1:3000');

/** The former forwardHeaders: withoutHopByHop's copy, a second copy, Host unshifted. */
function twoPasses(raw: RawHeaders, mode: HostHeaderMode): string[] {
  const headers = withoutHopByHop(raw);
  const out: string[] = [];
  let publicHost: string | undefined;
  for (let i = 0; i < headers.length; i += 2) {
    const lower = headers[i]!.toLowerCase();
    if (lower === 'host') publicHost = headers[i + 1];
    if (lower === 'expect' || lower === 'host') continue;
    out.push(headers[i]!, headers[i + 1]!);
  }
  const host = mode === 'rewrite' ? target.host : mode === 'preserve' ? publicHost : mode.value;
  if (host !== undefined) out.unshift('host', host);
  return out;
}

const modes: HostHeaderMode[] = ['rewrite', 'preserve', { value: 'given.example' }];
const name = fc.oneof(
  fc.constantFrom('Host', 'host', 'HOST', 'Expect', 'expect', 'Connection', 'Keep-Alive', 'TE', 'Upgrade'),
  fc.constantFrom('Transfer-Encoding', 'Trailer', 'Proxy-Connection', 'X-Forwarded-For', 'x-request-id'),
  fc.constantFrom('Set-Cookie', 'set-cookie', 'X-A', 'x-a', 'Cookie', 'Content-Type', 'Hóst', 'HOST\xc0'),
);
const value = fc.oneof(
  fc.constantFrom('keep-alive', 'x-a, Host', 'close, Expect', '100-continue', 'a.example', ' v ', ''),
  fc.string({ maxLength: 12 }),
);

describe('forwardHeaders', () => {
  it('builds in one pass what withoutHopByHop and a second copy built', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(name, value), { maxLength: 12 }),
        fc.constantFrom(...modes),
        (list, mode) => {
          const raw = list.flat();
          expect(forwardHeaders(raw, target, mode)).toEqual(twoPasses(raw, mode));
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('puts Host first and keeps order, case and repeated fields', () => {
    // biome-ignore format: one name/value pair per line
    const raw = [
      'Set-Cookie', 'a=1',
      'HOST', 'public.example',
      'Connection', 'X-Drop',
      'x-drop', 'no',
      'set-cookie', 'b=2',
      'Expect', '100-continue',
      'X-Forwarded-For', '203.0.113.9',
    ];
    const kept = ['Set-Cookie', 'a=1', 'set-cookie', 'b=2', 'X-Forwarded-For', '203.0.113.9'];
    expect(forwardHeaders(raw, target, 'rewrite')).toEqual(['host', '127.0.0.1:3000', ...kept]);
    expect(forwardHeaders(raw, target, 'preserve')).toEqual(['host', 'public.example', ...kept]);
    expect(forwardHeaders(['A', '1'], target, 'preserve')).toEqual(['A', '1']);
  });
});

// The response head, from undici's raw fields (latin1 bytes) to the list the agent encodes in one pass: it
// must be what withoutHopByHop of their strings was, Connection's options anywhere in the head included.
describe('responseFields', () => {
  const bytes = (list: string[]): Buffer[] => list.map((field) => Buffer.from(field, 'latin1'));

  it('is withoutHopByHop of the fields as strings, from bytes or strings', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(name, value), { maxLength: 12 }), (list) => {
        const raw = list.flat();
        expect(responseFields(bytes(raw))).toEqual(withoutHopByHop(raw));
        expect(responseFields(raw)).toEqual(withoutHopByHop(raw));
      }),
      { numRuns: 3000 },
    );
  });

  it('drops a field Connection names before it, keeps Set-Cookie repeats, and takes no parsed object', () => {
    // biome-ignore format: one name/value pair per line
    const raw = [
      'X-Early', 'gone',
      'Set-Cookie', 'a=1',
      'Connection', 'keep-alive, x-early',
      'Keep-Alive', 'timeout=5',
      'set-cookie', 'b=2',
      'Content-Length', '5',
    ];
    expect(responseFields(bytes(raw))).toEqual([
      'Set-Cookie',
      'a=1',
      'set-cookie',
      'b=2',
      'Content-Length',
      '5',
    ]);
    expect(responseFields({ a: '1' })).toEqual([]);
    expect(responseFields(null)).toEqual([]);
  });
});
