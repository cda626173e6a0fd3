import { describe, expect, it } from 'vitest';
import { parseRedisUrl, RegistryErrorCode, redactRedisUrl } from '../src/index.js';

// Pure parsing: no server, so these do not wait for a Redis Cluster to form.
describe('registry URLs', () => {
  it('parse one Redis, or a cluster from its seed list, with credentials', () => {
    expect(parseRedisUrl('redis://h:7000/2')).toEqual({
      cluster: false,
      tls: false,
      seeds: [{ host: 'h', port: 7000 }],
      username: undefined,
      password: undefined,
      db: 2,
    });
    expect(parseRedisUrl('rediss+cluster://u:p%40ss@a:7000,b,[::1]:7002')).toEqual({
      cluster: true,
      tls: true,
      seeds: [
        { host: 'a', port: 7000 },
        { host: 'b', port: 6379 },
        { host: '::1', port: 7002 },
      ],
      username: 'u',
      password: 'p@ss',
      db: 0,
    });
  });

  it('refuse what they cannot use, without showing the password', () => {
    for (const bad of [
      'http://h:1',
      'redis+cluster://',
      'redis+cluster://a:1,,b:2',
      'redis+cluster://a:1/3',
      'redis://a:99999',
      'redis://a:1/x',
      'redis+sentinel://a:1',
    ]) {
      expect(() => parseRedisUrl(bad), bad).toThrow(
        expect.objectContaining({ code: RegistryErrorCode.INVALID_ARGUMENT }),
      );
    }
    expect(() => parseRedisUrl('redis+cluster://u:s3cret@a:1,b:x')).toThrow(
      expect.objectContaining({ message: expect.not.stringContaining('s3cret') }),
    );
    expect(redactRedisUrl('redis+cluster://u:s3cret@a:1,b:2')).toBe('redis+cluster://u:redacted@a:1,b:2');
  });
});
