import { describe, expect, it } from 'vitest';
import { maskingNeeded, zeroMask } from '../src/index.js';

describe('maskingNeeded', () => {
  it('is false under TLS and on loopback, where no intercepting proxy reads the bytes', () => {
    for (const url of [
      'wss://edge.example.com/_tunnel2/connect',
      'https://node-2.internal:8443/_tunnel2/node-link',
      'ws://localhost:8080/',
      'http://127.0.0.1:8080/_tunnel2/node-link',
      'ws://127.3.4.5/',
      'http://[::1]:9000/',
      // The URL parser normalises these before the rule sees them.
      'HTTPS://NODE.EXAMPLE/',
      'http://LOCALHOST/',
      'http://[0:0:0:0:0:0:0:1]/',
      'http://127.1/',
      'http://0x7f.1/',
    ])
      expect(maskingNeeded(url), url).toBe(false);
  });

  it('is true for plain connections to any other host', () => {
    for (const url of [
      'ws://edge.example.com/_tunnel2/connect',
      'http://10.0.0.7:8080/_tunnel2/node-link',
      'http://localhost.evil.example/',
      'http://128.0.0.1/',
      'http://127.example.com/',
      'http://u:p@10.0.0.1/',
      // IPv4-mapped loopback is not recognised: masked, the conservative side.
      'http://[::ffff:127.0.0.1]/',
    ])
      expect(maskingNeeded(url), url).toBe(true);
  });

  it('zeroMask leaves every byte of the mask at 0', () => {
    const mask = Buffer.from([1, 2, 3, 4]);
    zeroMask(mask);
    expect([...mask]).toEqual([0, 0, 0, 0]);
  });
});
