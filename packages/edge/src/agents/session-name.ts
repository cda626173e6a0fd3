import { createHash, randomBytes } from 'node:crypto';
import { quoteForEcho } from '../answers/echo.js';
import { EdgeErrorCode } from '../errors.js';

const label = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** True for a valid DNS label (lowercase letters, digits, inner hyphens, 1–63 chars). */
export function isValidSessionName(name: string): boolean {
  return label.test(name);
}

/** Names an operator's own services are likely to use; agents cannot claim them. */
export const reservedNames: ReadonlySet<string> = new Set([
  'www',
  'api',
  'admin',
  'app',
  'edge',
  'mail',
  'smtp',
  'ftp',
  'ns',
  'ns1',
  'ns2',
  'status',
  'metrics',
  'dashboard',
  'static',
  'cdn',
  'localhost',
]);

const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';

/** A random session name: 26 base32 characters carry 130 bits, so names cannot be guessed. */
export function randomSessionName(): string {
  const bytes = randomBytes(26);
  let name = '';
  for (const byte of bytes) name += alphabet[byte & 31];
  return name;
}

export type NameCheck = { ok: true } | { ok: false; reason: 'invalid' | 'reserved' };

export function checkRequestedName(name: string): NameCheck {
  if (!isValidSessionName(name)) return { ok: false, reason: 'invalid' };
  if (reservedNames.has(name)) return { ok: false, reason: 'reserved' };
  return { ok: true };
}

/**
 * Why a requested name cannot be had (invalid, or reserved), worded once for a session's own name and a
 * listed tunnel's; undefined when it may be asked for.
 */
export function nameRefusal(name: string): { code: EdgeErrorCode; message: string } | undefined {
  const check = checkRequestedName(name);
  if (check.ok) return undefined;
  return check.reason === 'reserved'
    ? {
        code: EdgeErrorCode.RESERVED_NAME,
        message: `subdomain "${name}" is reserved by this edge (names its operator keeps for their own services): choose another`,
      }
    : {
        code: EdgeErrorCode.INVALID_NAME,
        message: `subdomain ${quoteForEcho(name)} is not a valid DNS label (a-z, 0-9, inner hyphens, at most 63 characters)`,
      };
}

/** The registry stores an owner key, never a secret: a hash of what identifies the agent. */
export function ownerKey(secret: string): string {
  return createHash('sha256').update(secret).digest('base64url');
}
