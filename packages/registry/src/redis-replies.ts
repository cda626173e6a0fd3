import { RegistryError, RegistryErrorCode } from './errors.js';
import type { NodeRecord, SessionRecord } from './session-registry.js';

// What the Redis registry reads back (script replies, session hashes, node records) as typed values:
// anything that is not what this registry writes is UNAVAILABLE, never taken on trust.

export const SESSION_FIELDS = ['name', 'nodeId', 'owner', 'epoch', 'expiresAt', 'connected'] as const;
/** What a read asks for: the session's fields and its account (absent from a hash of an older version). */
export const RECORD_FIELDS = [...SESSION_FIELDS, 'account'] as const;

/**
 * What a write script answered: undefined when it changed nothing, else the account the record counted
 * against ('' for a record written before records stored it).
 */
export function actedOn(reply: unknown): { account: string } | undefined {
  if (reply === 0) return undefined;
  if (Array.isArray(reply) && reply[0] === 1 && typeof reply[1] === 'string') return { account: reply[1] };
  throw unavailable('unexpected reply from Redis');
}

export function unavailable(message: string, cause?: unknown): RegistryError {
  return new RegistryError(RegistryErrorCode.UNAVAILABLE, message, { cause });
}

/** A stored epoch or time back to a number; anything else means the data is not ours. */
export function parseNumber(value: unknown, integer: boolean): number {
  const n = typeof value === 'string' ? Number(value) : Number.NaN;
  if (!Number.isFinite(n) || (integer && !Number.isSafeInteger(n))) {
    throw unavailable(`unexpected value in Redis: ${String(value)}`);
  }
  return n;
}

/**
 * An HMGET of RECORD_FIELDS (or of SESSION_FIELDS: no account) as a record, or undefined when the hash is
 * absent or expired at `now`.
 */
export function toRecord(values: unknown, now: number): SessionRecord | undefined {
  if (
    !Array.isArray(values) ||
    (values.length !== SESSION_FIELDS.length && values.length !== RECORD_FIELDS.length)
  ) {
    throw unavailable('unexpected reply from Redis');
  }
  const [name, nodeId, owner, epoch, expiresAt, connected, account] = values as unknown[];
  if (name === null || name === undefined) return undefined;
  if (typeof name !== 'string' || typeof nodeId !== 'string' || typeof owner !== 'string') {
    throw unavailable('unexpected session hash in Redis');
  }
  const record: SessionRecord = {
    name,
    nodeId,
    owner,
    epoch: parseNumber(epoch, true),
    expiresAt: parseNumber(expiresAt, false),
    connected: connected === '1',
    ...(typeof account === 'string' && account !== '' ? { account } : {}),
  };
  return record.expiresAt > now ? record : undefined;
}

export function toNodeRecord(nodeId: string, value: string | null, now: number): NodeRecord | undefined {
  if (value === null) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (err) {
    throw unavailable('unexpected node record in Redis', err);
  }
  const { url, expiresAt, signature } = (parsed ?? {}) as {
    url?: unknown;
    expiresAt?: unknown;
    signature?: unknown;
  };
  if (typeof url !== 'string' || typeof expiresAt !== 'number') {
    throw unavailable('unexpected node record in Redis');
  }
  if (expiresAt <= now) return undefined;
  // A signature that is not a string is no signature: the edge then ignores the record as unsigned.
  return typeof signature === 'string' ? { nodeId, url, expiresAt, signature } : { nodeId, url, expiresAt };
}
