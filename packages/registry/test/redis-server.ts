/*
 * The real redis-server the tests start now lives in @tunnel2/test-services (shared with the bench). This
 * name stays only for packages/cli/test/e2e-tcp-real.test.ts, which imports it from here; once that file
 * imports @tunnel2/test-services itself, this file goes.
 */
export {
  type RedisServer as TestRedisServer,
  startRedisServer as startTestRedisServer,
} from '@tunnel2/test-services';
