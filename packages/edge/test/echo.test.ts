import { describe, expect, it } from 'vitest';
import { compileAddressBlocks } from '../src/access/client-address.js';
import { compileProtection } from '../src/access/public-protection.js';
import { quoteForEcho } from '../src/answers/echo.js';

describe('quoteForEcho', () => {
  it('quotes, escapes control characters and cuts long values with an ellipsis', () => {
    expect(quoteForEcho('app')).toBe('"app"');
    expect(quoteForEcho('a"b\\c')).toBe('"a\\"b\\\\c"');
    expect(quoteForEcho('a\r\nb\u0000c\u007fd\u009be\u2028')).toBe(
      '"a\\r\\nb\\u0000c\\u007fd\\u009be\\u2028"',
    );
    expect(quoteForEcho('x'.repeat(500), 10)).toBe(`"${'x'.repeat(10)}…"`);
  });
});

describe('address blocks (--allow-ip, trustProxy)', () => {
  it('refuse an empty or repeated prefix, which used to read as /0 and allow everyone', () => {
    expect(compileAddressBlocks(['10.0.0.1/'])).toEqual({ invalid: '10.0.0.1/' });
    expect(compileAddressBlocks(['10.0.0.0/8/9'])).toEqual({ invalid: '10.0.0.0/8/9' });
    expect(compileProtection({ allowIps: ['10.0.0.1/'] })).toEqual({
      error: 'allowIps entry "10.0.0.1/" is not an IP address or CIDR block',
    });
  });
});
