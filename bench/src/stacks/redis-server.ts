import { type RedisServer, startRedisServer as startShared } from '@tunnel2/test-services';
import { startNative } from './native-service.js';

/**
 * A real `redis-server` (the Debian package) on a free loopback port, no persistence, for the benches that
 * run the edge in cluster mode; `info()` reads INFO all and `pid` finds its CPU time in /proc.
 */
export type { RedisServer };

export function startRedisServer(): Promise<RedisServer> {
  return startNative('redis-server', () => startShared());
}
