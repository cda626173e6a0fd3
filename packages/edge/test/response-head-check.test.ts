import { describe, expect, it } from 'vitest';
import {
  checkResponseHead,
  fieldsAreValid,
  type HeadCheck,
  type HeadRequest,
} from '../src/exchange/response-head-check.js';

const get: HeadRequest = { method: 'GET', upgrade: false };

function check(status: number, headers: string[] = [], statusMessage = '', request = get): HeadCheck {
  return checkResponseHead({ status, statusMessage, headers }, request);
}

function problem(result: HeadCheck): string {
  if (result.ok) throw new Error('expected the head to be rejected');
  return result.problem;
}

describe('status', () => {
  it.each([0, 99, 1000, 65_535, 200.5])('rejects status %s', (status) => {
    expect(problem(check(status))).toContain('outside 100-999');
  });

  it('accepts 100-999 and tells interim from final', () => {
    expect(check(100)).toMatchObject({ ok: true, kind: 'interim', bodyLimit: 0 });
    expect(check(199)).toMatchObject({ ok: true, kind: 'interim' });
    expect(check(200)).toMatchObject({ ok: true, kind: 'final', bodyLimit: Number.POSITIVE_INFINITY });
    expect(check(999)).toMatchObject({ ok: true, kind: 'final' });
  });

  it('takes 101 only as the answer to an upgrade', () => {
    expect(problem(check(101))).toContain('asked for no upgrade');
    expect(check(101, ['Upgrade', 'websocket'], '', { method: 'GET', upgrade: true })).toMatchObject({
      ok: true,
      kind: 'switch',
      bodyLimit: Number.POSITIVE_INFINITY,
    });
  });
});

describe('text', () => {
  it.each(['OK\r\nSet-Cookie: a=1', 'OK\n', 'O\0K', 'O\x7fK'])('rejects reason %j', (reason) => {
    expect(problem(check(200, [], reason))).toContain('reason phrase');
  });

  it('accepts a reason with spaces, tabs and obs-text', () => {
    expect(check(200, [], 'Very\tFine \xe9').ok).toBe(true);
  });

  it.each(['Bad\r\nName', 'Bad Name', '', 'a:b', 'x\0', 'caf\xe9'])('rejects header name %j', (name) => {
    expect(problem(check(200, [name, 'x']))).toContain('is not a token');
  });

  it('escapes and bounds what it echoes', () => {
    expect(problem(check(200, ['Bad\r\nName', 'x']))).toBe('header name "Bad\\r\\nName" is not a token');
    const long = problem(check(200, [`${'x'.repeat(5_000)}\n`, 'x']));
    expect(long.length).toBeLessThan(120);
    expect(long).toContain('xxx…" is not a token');
  });

  it.each(['fine\r\nSet-Cookie: a=1', 'a\nb', 'a\rb', 'a\0b', 'a\x01b'])('rejects value %j', (value) => {
    expect(problem(check(200, ['X-A', value]))).toContain('forbidden character');
  });

  it('accepts values with tabs, spaces and obs-text, and an empty value', () => {
    expect(check(200, ['X-A', 'a\tb c\xff', 'X-B', '']).ok).toBe(true);
  });

  it('decides every code unit up to 0x1ff as RFC 9110 token and field-value rules say', () => {
    // The grammar as regular expressions, independent of how the check is written.
    const token = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
    const text = /^[\t\x20-\x7e\x80-\xff]*$/;
    for (let c = 0; c <= 0x1ff; c++) {
      const ch = String.fromCharCode(c);
      expect(check(200, [`X${ch}`, 'v']).ok, `name with ${c}`).toBe(token.test(`X${ch}`));
      expect(check(200, ['X-A', `a${ch}b`]).ok, `value with ${c}`).toBe(text.test(`a${ch}b`));
      expect(check(200, [], `O${ch}K`).ok, `reason with ${c}`).toBe(text.test(`O${ch}K`));
      expect(fieldsAreValid([ch, `${ch}`]), `trailer with ${c}`).toBe(token.test(ch) && text.test(ch));
    }
  });
});

describe('Content-Length', () => {
  it('one value is the body limit, and the fields are kept as they are', () => {
    const headers = ['Content-Length', '5', 'X-A', 'b'];
    const result = check(200, headers);
    expect(result).toMatchObject({ ok: true, bodyLimit: 5 });
    expect(result.ok && result.headers).toBe(headers);
  });

  it('identical repeated values (as fields or as a list) fold into one field', () => {
    for (const headers of [
      ['Content-Length', '5', 'X-A', 'b', 'content-length', '5'],
      ['Content-Length', '5, 5', 'X-A', 'b'],
      ['Content-Length', ' 5 ', 'X-A', 'b'],
    ]) {
      expect(check(200, headers)).toEqual({
        ok: true,
        kind: 'final',
        bodyLimit: 5,
        headers: ['Content-Length', '5', 'X-A', 'b'],
      });
    }
  });

  it.each([
    [['Content-Length', '5', 'Content-Length', '6'], 'conflicting values'],
    [['Content-Length', '5, 6'], 'conflicting values'],
    [['Content-Length', 'abc'], 'not a decimal length'],
    [['Content-Length', '-1'], 'not a decimal length'],
    [['Content-Length', '+5'], 'not a decimal length'],
    [['Content-Length', '0x10'], 'not a decimal length'],
    [['Content-Length', '1e3'], 'not a decimal length'],
    [['Content-Length', ''], 'not a decimal length'],
    [['Content-Length', '5,'], 'not a decimal length'],
    [['Content-Length', '9007199254740992'], 'too large'],
  ])('rejects %j', (headers, what) => {
    expect(problem(check(200, headers))).toContain(what);
  });

  it('accepts the largest safe integer', () => {
    expect(check(200, ['Content-Length', String(Number.MAX_SAFE_INTEGER)])).toMatchObject({
      bodyLimit: Number.MAX_SAFE_INTEGER,
    });
  });

  it('a response that has no body gets a limit of 0 whatever it declares', () => {
    expect(check(200, ['Content-Length', '5'], '', { method: 'HEAD', upgrade: false })).toMatchObject({
      ok: true,
      bodyLimit: 0,
    });
    expect(check(304, ['Content-Length', '5'])).toMatchObject({ ok: true, bodyLimit: 0 });
    expect(check(204)).toMatchObject({ ok: true, bodyLimit: 0 });
    expect(check(204, ['Content-Length', '0'])).toMatchObject({ ok: true, bodyLimit: 0 });
  });

  it('1xx and 204 must not declare a length', () => {
    expect(problem(check(204, ['Content-Length', '5']))).toContain('must not declare');
    expect(problem(check(102, ['Content-Length', '5']))).toContain('must not declare');
  });
});

describe('Transfer-Encoding', () => {
  it('with Content-Length is rejected, in either order', () => {
    expect(problem(check(200, ['Transfer-Encoding', 'chunked', 'Content-Length', '5']))).toContain('both');
    expect(problem(check(200, ['Content-Length', '5', 'Transfer-Encoding', 'chunked']))).toContain('both');
  });

  it('ending in chunked is an undeclared length the edge frames again', () => {
    expect(check(200, ['Transfer-Encoding', 'gzip, chunked'])).toMatchObject({
      ok: true,
      bodyLimit: Number.POSITIVE_INFINITY,
    });
    expect(check(200, ['Transfer-Encoding', 'gzip', 'Transfer-Encoding', 'Chunked']).ok).toBe(true);
  });

  it('not ending in chunked is rejected', () => {
    expect(problem(check(200, ['Transfer-Encoding', 'gzip']))).toContain('does not end in chunked');
    expect(problem(check(200, ['Transfer-Encoding', 'chunked, gzip']))).toContain('does not end in chunked');
  });

  it('on 1xx and 204 is rejected', () => {
    expect(problem(check(204, ['Transfer-Encoding', 'chunked']))).toContain('must not have');
    expect(problem(check(103, ['Transfer-Encoding', 'chunked']))).toContain('must not have');
  });
});

describe('fieldsAreValid (trailers)', () => {
  it('takes token names with clean values, and nothing else', () => {
    expect(fieldsAreValid(['X-Checksum', 'abc', 'Server-Timing', 'db;dur=5'])).toBe(true);
    expect(fieldsAreValid(['Bad Name', 'x'])).toBe(false);
    expect(fieldsAreValid(['X-A', 'a\r\nSet-Cookie: b=1'])).toBe(false);
    expect(fieldsAreValid(['X-A', 'a\0'])).toBe(false);
  });
});
