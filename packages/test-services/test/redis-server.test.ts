import { describe, expect, it } from 'vitest';
import { accepts, freePort, ServiceErrorCode, startRedisServer } from '../src/index.js';

describe('startRedisServer', () => {
  it('answers on its port, reports its pid and INFO, and restarts on the same port', async () => {
    const redis = await startRedisServer();
    try {
      expect(redis.url).toBe(`redis://127.0.0.1:${redis.port}`);
      const first = redis.pid;
      expect(first).toBeGreaterThan(0);
      const info = await redis.info();
      expect(info.get('tcp_port')).toBe(String(redis.port));
      expect(info.get('process_id')).toBe(String(first));
      await redis.stop();
      expect(await accepts(redis.port)).toBe(false);
      expect(redis.pid).toBe(0);
      await redis.start();
      expect(redis.pid).not.toBe(first);
      expect((await redis.info()).get('tcp_port')).toBe(String(redis.port));
    } finally {
      await redis.stop();
    }
  });

  // A start that fails must not leave a redis-server behind on the port (it would outlive the test run).
  it('kills the server when its ready line never comes', async () => {
    const port = await freePort();
    await expect(
      startRedisServer({
        port,
        // At loglevel warning the server runs and answers, but never prints its (notice-level) ready line.
        extraArgs: () => ['--loglevel', 'warning'],
        readyTimeoutMs: 300,
      }),
    ).rejects.toMatchObject({ code: ServiceErrorCode.START });
    expect(await accepts(port)).toBe(false);
  });

  it('kills the server when it does not answer PING', async () => {
    const port = await freePort();
    // With a password, PING is answered -NOAUTH.
    await expect(
      startRedisServer({ port, extraArgs: () => ['--requirepass', 'not-for-ping'] }),
    ).rejects.toMatchObject({ code: ServiceErrorCode.START });
    expect(await accepts(port)).toBe(false);
  });

  it('fails at once with what the server printed when it exits first', async () => {
    await expect(startRedisServer({ extraArgs: () => ['--no-such-flag', 'x'] })).rejects.toMatchObject({
      code: ServiceErrorCode.START,
      message: expect.stringContaining('no-such-flag'),
    });
  });
});
