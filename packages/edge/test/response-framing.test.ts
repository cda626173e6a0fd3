import { encodeResponseHead } from '@tunnel2/protocol';
import { describe, expect, it } from 'vitest';
import { MAX_INTERIM_HEADS } from '../src/exchange/informational.js';
import { ResponseFraming } from '../src/exchange/response-framing.js';

const encode = (status: number, headers: string[] = []): Buffer =>
  encodeResponseHead({ status, statusMessage: '', headers }, 1 << 16);

describe('ResponseFraming', () => {
  it('counts a body against its declared length: what fits, then the overrun', () => {
    const framing = new ResponseFraming({ method: 'GET', upgrade: false });
    expect(framing.head(encode(200, ['Content-Length', '5']), false)).toMatchObject({ ok: true });
    expect(framing.fit(3)).toBe(3);
    expect(framing.short).toBe(true);
    expect(framing.fit(4)).toBe(2);
  });

  it('is short until the declared length arrives, never for an undeclared one', () => {
    const declared = new ResponseFraming({ method: 'GET', upgrade: false });
    declared.head(encode(200, ['Content-Length', '2']), false);
    expect(declared.short).toBe(true);
    expect(declared.fit(2)).toBe(2);
    expect(declared.short).toBe(false);
    const open = new ResponseFraming({ method: 'GET', upgrade: false });
    open.head(encode(200), false);
    expect(open.fit(1_000_000)).toBe(1_000_000);
    expect(open.short).toBe(false);
  });

  it('refuses an interim head that ends the stream, and a flood of them', () => {
    expect(new ResponseFraming({ method: 'GET', upgrade: false }).head(encode(103), true)).toEqual({
      ok: false,
      problem: 'the stream ended after the interim status 103',
    });
    const framing = new ResponseFraming({ method: 'GET', upgrade: true });
    for (let i = 0; i < MAX_INTERIM_HEADS; i++) expect(framing.head(encode(102), false).ok).toBe(true);
    expect(framing.interim).toBe(MAX_INTERIM_HEADS);
    expect(framing.head(encode(102), false)).toEqual({
      ok: false,
      problem: `more than ${MAX_INTERIM_HEADS} interim (1xx) responses`,
    });
  });

  it('turns a head the codec refuses into a problem, not a throw', () => {
    const framing = new ResponseFraming({ method: 'GET', upgrade: false });
    expect(framing.head(Buffer.from([0, 1]), false).ok).toBe(false);
  });
});
