import { describe, expect, it } from 'vitest';
import { addressBlock } from '../src/access/address-block.js';

describe('addressBlock', () => {
  it('keeps an IPv4 address, and gives an IPv6 address its /64 in one spelling', () => {
    expect(addressBlock('203.0.113.7')).toBe('203.0.113.7');
    expect(addressBlock('2001:db8:0:1::a')).toBe('2001:db8:0:1::/64');
    expect(addressBlock('2001:0DB8:0000:0001:ffff:1:2:3')).toBe('2001:db8:0:1::/64');
    expect(addressBlock('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(addressBlock('::1')).toBe('0:0:0:0::/64');
    expect(addressBlock('::')).toBe('0:0:0:0::/64');
    expect(addressBlock('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(addressBlock('64:ff9b::192.0.2.1')).toBe('64:ff9b:0:0::/64');
    expect(addressBlock('1:2:3:4:5:6:192.0.2.1')).toBe('1:2:3:4::/64');
  });

  it('returns what is not an IP address as it is', () => {
    expect(addressBlock('')).toBe('');
    expect(addressBlock('not-an-address')).toBe('not-an-address');
  });
});
