/*
 * The Lua scripts of the Redis registry. Each runs atomically on the Redis server (nothing interleaves
 * with a script), which is what makes check-then-write safe across edge nodes. Every script touches only
 * keys of one hash tag (one cluster slot): a session hash `<prefix>{b<n>}:s:<name>` and, for a claim, the
 * epoch counter `<prefix>{b<n>}:epoch` of the same bucket.
 *
 * A record also stores the `account` its claim counts against; for a name of a key space (`<space>:<key>`)
 * the owner index `<prefix>{o<n>}:own:<space>:<account>` lists it (INDEX_SCRIPT, a separate call: another slot). The
 * write scripts answer that account, so the registry can keep the index alive as long as the record, or
 * take the name out of it when the record goes.
 *
 * Shared conventions:
 * - `now` and `expiresAt` come from the caller's clock (ms since the Unix epoch, decimal strings). A record
 *   with `expiresAt <= now` is treated as absent by every script, whatever Redis's own expiry says.
 * - The Redis key expiry (PEXPIRE `gcTtlMs`, the lease plus a margin) is garbage collection only: it runs
 *   after the logical expiry and never decides who holds a name.
 * - Epochs are decimal strings of integers below 2^53 and compared as strings (one canonical form:
 *   `string.format('%.0f')` here, `String(n)` in TypeScript).
 */

import { SET_BLOCKS_CLAIM } from './redis-replica-scripts.js';

/**
 * Claim. KEYS: session hash, bucket epoch counter, the name's replica set hash (redis-replica-scripts.ts).
 * ARGV: name, nodeId, owner, expiresAt, now, gcTtlMs,
 * account.
 * Guarantees: a live record of another owner is returned untouched ({'refused', nodeId, owner, epoch,
 * expiresAt, connected, account}); otherwise the name is taken with an epoch greater than every epoch this bucket
 * ever handed out (its counter only moves up, and outlives every record of the bucket) and not below Redis's
 * clock in microseconds (so after a failover that lost the counter's last writes, new epochs still land
 * above the lost ones; see redis-registry.ts). Returns {'claimed', epoch}, or, when it took over a live
 * record of the same owner, {'claimed', epoch, nodeId, owner, epoch, expiresAt, connected, account} of it
 * (read in the same atomic step, so it is exactly the claim this one superseded). A live replica set of
 * another owner refuses the claim too, answered as a record of its first live holder.
 */
export const CLAIM_SCRIPT = `${SET_BLOCKS_CLAIM}
local held = redis.call('HMGET', KEYS[1], 'owner', 'expiresAt', 'nodeId', 'epoch', 'connected', 'account')
local live = held[1] and tonumber(held[2]) > tonumber(ARGV[5])
if live and held[1] ~= ARGV[3] then
  return {'refused', held[3], held[1], held[4], held[2], held[5], held[6] or ''}
end
local time = redis.call('TIME')
local floor = tonumber(time[1]) * 1000000 + tonumber(time[2])
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local epoch = string.format('%.0f', math.max(last + 1, floor))
redis.call('SET', KEYS[2], epoch)
redis.call('HSET', KEYS[1], 'name', ARGV[1], 'nodeId', ARGV[2], 'owner', ARGV[3], 'epoch', epoch,
  'expiresAt', ARGV[4], 'connected', '1', 'account', ARGV[7])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
if live then return {'claimed', epoch, held[3], held[1], held[4], held[2], held[5], held[6] or ''} end
return {'claimed', epoch}
`;

/**
 * Renew. KEYS: session hash. ARGV: epoch, now, expiresAt, gcTtlMs.
 * Guarantees: only the current epoch of a live, connected record is extended ({1, account or ''}); a stale
 * epoch, a gone or expired record, or a reservation (connected = 0) is left as it is (0): a late heartbeat
 * never revives a reservation and never extends a newer holder's lease.
 */
export const RENEW_SCRIPT = `
local held = redis.call('HMGET', KEYS[1], 'epoch', 'expiresAt', 'connected', 'account')
if held[1] ~= ARGV[1] or held[3] ~= '1' or tonumber(held[2]) <= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'expiresAt', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {1, held[4] or ''}
`;

/**
 * Mark disconnected. KEYS: session hash. ARGV: epoch, now, expiresAt ('' for a grace of 0), gcTtlMs.
 * Guarantees: only the current epoch of a live record is turned into a reservation until expiresAt, or
 * deleted when the grace is 0 ({1, account or ''}); anything else changes nothing (0), so a replaced
 * connection closing late cannot turn its successor into a reservation.
 */
export const MARK_DISCONNECTED_SCRIPT = `
local held = redis.call('HMGET', KEYS[1], 'epoch', 'expiresAt', 'account')
if held[1] ~= ARGV[1] or tonumber(held[2]) <= tonumber(ARGV[2]) then return 0 end
if ARGV[3] == '' then
  redis.call('DEL', KEYS[1])
  return {1, held[3] or ''}
end
redis.call('HSET', KEYS[1], 'connected', '0', 'expiresAt', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {1, held[3] or ''}
`;

/**
 * Release. KEYS: session hash. ARGV: epoch, now.
 * Guarantees: deletes the record only if it is live and holds exactly this epoch ({1, account or ''});
 * otherwise 0 and nothing changes. The bucket counter is not touched, so epochs keep rising after a release.
 */
export const RELEASE_SCRIPT = `
local held = redis.call('HMGET', KEYS[1], 'epoch', 'expiresAt', 'account')
if held[1] ~= ARGV[1] or tonumber(held[2]) <= tonumber(ARGV[2]) then return 0 end
redis.call('DEL', KEYS[1])
return {1, held[3] or ''}
`;

/**
 * Index. KEYS: an owner index set. ARGV: gcTtlMs, and the name to add (absent: only keep the set alive).
 * Guarantees: the set lives at least gcTtlMs from now, never less than it already had (its TTL covers the
 * longest-lived record it lists, so it never outlives them by more than the GC margin, nor dies before one
 * of them); a set without an expiry (written before the index had one) gets it. An absent set is not
 * created without names.
 */
export const INDEX_SCRIPT = `
if #ARGV >= 2 then redis.call('SADD', KEYS[1], unpack(ARGV, 2)) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -1 or (ttl >= 0 and ttl < tonumber(ARGV[1])) then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return 1
`;
