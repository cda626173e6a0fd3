/*
 * The Lua scripts of the Redis registry's replica sets (replica-sets.ts), beside those of redis-scripts.ts
 * and under the same conventions (caller's clock, PEXPIRE as garbage collection only, epochs as decimal
 * strings from the bucket counter). A set is the hash `<prefix>{b<n>}:r:<name>`, in the slot of the name's
 * session hash and epoch counter: {name, owner, account, n:<nodeId> = "<epoch>/<expiresAt>" per holder}.
 * A holder whose expiresAt <= now is absent; a set without a live holder is absent (another owner may take
 * it, and its fields are overwritten then).
 */

/** Lua: the live holders of the set in KEYS[idx] at `now`, dropping the expired ones; and the set's owner. */
const LIVE_HOLDERS = `
local function liveHolders(key, now)
  local all = redis.call('HGETALL', key)
  local owner, account, holders = nil, nil, {}
  for i = 1, #all, 2 do
    local field, value = all[i], all[i + 1]
    if field == 'owner' then owner = value
    elseif field == 'account' then account = value
    elseif string.sub(field, 1, 2) == 'n:' then
      local slash = string.find(value, '/', 1, true)
      local expiresAt = string.sub(value, slash + 1)
      if tonumber(expiresAt) > now then
        holders[#holders + 1] = {string.sub(field, 3), string.sub(value, 1, slash - 1), expiresAt}
      else
        redis.call('HDEL', key, field)
      end
    end
  end
  return owner, account, holders
end
local function keepAtLeast(key, gcTtlMs)
  local ttl = redis.call('PTTL', key)
  if ttl < tonumber(gcTtlMs) then redis.call('PEXPIRE', key, gcTtlMs) end
end
`;

/**
 * Claim a place. KEYS: session hash, bucket epoch counter, set hash. ARGV: name, nodeId, owner, expiresAt,
 * now, gcTtlMs, account. Refused ({'refused', owner}) while a live session record or a live set of another
 * owner holds the name; else {'claimed', epoch}, the epoch taken as CLAIM_SCRIPT takes it.
 */
export const CLAIM_REPLICA_SCRIPT = `${LIVE_HOLDERS}
local now = tonumber(ARGV[5])
local held = redis.call('HMGET', KEYS[1], 'owner', 'expiresAt')
if held[1] and tonumber(held[2]) > now and held[1] ~= ARGV[3] then return {'refused', held[1]} end
local owner, _, holders = liveHolders(KEYS[3], now)
if #holders > 0 and owner ~= ARGV[3] then return {'refused', owner} end
local time = redis.call('TIME')
local floor = tonumber(time[1]) * 1000000 + tonumber(time[2])
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local epoch = string.format('%.0f', math.max(last + 1, floor))
redis.call('SET', KEYS[2], epoch)
redis.call('HSET', KEYS[3], 'name', ARGV[1], 'owner', ARGV[3], 'account', ARGV[7], 'n:' .. ARGV[2],
  epoch .. '/' .. ARGV[4])
keepAtLeast(KEYS[3], ARGV[6])
return {'claimed', epoch}
`;

/**
 * Renew a place. KEYS: set hash. ARGV: nodeId, epoch, now, expiresAt, gcTtlMs. 1 when the holder's live
 * place at exactly this epoch was extended, else 0.
 */
export const RENEW_REPLICA_SCRIPT = `${LIVE_HOLDERS}
local value = redis.call('HGET', KEYS[1], 'n:' .. ARGV[1])
if not value then return 0 end
local slash = string.find(value, '/', 1, true)
if string.sub(value, 1, slash - 1) ~= ARGV[2] or tonumber(string.sub(value, slash + 1)) <= tonumber(ARGV[3]) then
  return 0
end
redis.call('HSET', KEYS[1], 'n:' .. ARGV[1], ARGV[2] .. '/' .. ARGV[4])
keepAtLeast(KEYS[1], ARGV[5])
return 1
`;

/**
 * Release a place. KEYS: set hash. ARGV: nodeId, epoch, now. 1 when the holder's live place at exactly this
 * epoch was removed (the hash goes with its last live holder), else 0.
 */
export const RELEASE_REPLICA_SCRIPT = `${LIVE_HOLDERS}
local value = redis.call('HGET', KEYS[1], 'n:' .. ARGV[1])
if not value then return 0 end
local slash = string.find(value, '/', 1, true)
if string.sub(value, 1, slash - 1) ~= ARGV[2] or tonumber(string.sub(value, slash + 1)) <= tonumber(ARGV[3]) then
  return 0
end
redis.call('HDEL', KEYS[1], 'n:' .. ARGV[1])
local _, _, holders = liveHolders(KEYS[1], tonumber(ARGV[3]))
if #holders == 0 then redis.call('DEL', KEYS[1]) end
return 1
`;

/**
 * The set's owner and first live holder, for CLAIM_SCRIPT's refusal. Lua spliced into it: KEYS[3] is the
 * set hash, ARGV[3] the claiming owner, ARGV[5] now.
 */
export const SET_BLOCKS_CLAIM = `${LIVE_HOLDERS}
do
  local owner, account, holders = liveHolders(KEYS[3], tonumber(ARGV[5]))
  local first = holders[1]
  if first and owner ~= ARGV[3] then
    return {'refused', first[1], owner, first[2], first[3], '1', account or ''}
  end
end
`;
