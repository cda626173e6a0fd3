import { type Clock, systemClock } from './clock.js';
import { RegistryError, RegistryErrorCode } from './errors.js';
import { parseRedisUrl, type RedisAddress } from './redis-url.js';

// The Redis registry's options as given, their defaults, and their checks: a bad one fails at creation.

export interface RedisRegistryOptions {
  /**
   * `redis://[user:password@]host:port[/db]` (or `rediss://` for TLS), or for a Redis Cluster
   * `redis+cluster://[user:password@]host:port,host:port...` (or `rediss+cluster://`): see redis-url.ts.
   */
  url: string;
  /** Prefix of every key, so several deployments can share one Redis; default `tunnel2:`. No braces. */
  keyPrefix?: string;
  /** Time source for leases; default `Date.now`. */
  clock?: Clock;
  /** A command not answered within this many ms fails with UNAVAILABLE; default 2,000. */
  commandTimeoutMs?: number;
  /** Connecting (at creation and on reconnects) gives up after this many ms; default 5,000. */
  connectTimeoutMs?: number;
  /** Redis keeps a key this long past its logical expiry before deleting it; default 60,000. */
  gcMarginMs?: number;
  /** Commands per pipelined batch in renewMany and list; default 1,000. */
  batchSize?: number;
}

export const DEFAULT_KEY_PREFIX = 'tunnel2:';
export const DEFAULT_COMMAND_TIMEOUT_MS = 2_000;
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
export const DEFAULT_GC_MARGIN_MS = 60_000;
export const DEFAULT_BATCH_SIZE = 1_000;

export interface ResolvedRedisRegistryOptions {
  url: string;
  address: RedisAddress;
  keyPrefix: string;
  clock: Clock;
  commandTimeoutMs: number;
  connectTimeoutMs: number;
  gcMarginMs: number;
  batchSize: number;
}

function invalid(message: string): RegistryError {
  return new RegistryError(RegistryErrorCode.INVALID_ARGUMENT, message);
}

function positiveInteger(what: string, value: number | undefined, fallback: number, min = 1): number {
  const n = value ?? fallback;
  if (!Number.isSafeInteger(n) || n < min || n > 2_147_483_647) {
    throw invalid(`${what} must be an integer in [${min}, 2147483647], got ${String(n)}`);
  }
  return n;
}

export function resolveRedisRegistryOptions(options: RedisRegistryOptions): ResolvedRedisRegistryOptions {
  if (typeof options !== 'object' || options === null) throw invalid('options must be an object');
  const address = parseRedisUrl(options.url);
  const keyPrefix = options.keyPrefix ?? DEFAULT_KEY_PREFIX;
  // A brace in the prefix would become the hash tag and put every key in one slot (or break the scripts'
  // single-slot rule on a cluster).
  if (typeof keyPrefix !== 'string' || /[{}]/.test(keyPrefix))
    throw invalid('keyPrefix must contain no braces');
  if (options.clock !== undefined && typeof options.clock !== 'function') {
    throw invalid('clock must be a function returning ms');
  }
  return {
    url: options.url,
    address,
    keyPrefix,
    clock: options.clock ?? systemClock,
    commandTimeoutMs: positiveInteger(
      'commandTimeoutMs',
      options.commandTimeoutMs,
      DEFAULT_COMMAND_TIMEOUT_MS,
    ),
    connectTimeoutMs: positiveInteger(
      'connectTimeoutMs',
      options.connectTimeoutMs,
      DEFAULT_CONNECT_TIMEOUT_MS,
    ),
    gcMarginMs: positiveInteger('gcMarginMs', options.gcMarginMs, DEFAULT_GC_MARGIN_MS, 0),
    batchSize: positiveInteger('batchSize', options.batchSize, DEFAULT_BATCH_SIZE),
  };
}
