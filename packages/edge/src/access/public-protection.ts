import { createHash, timingSafeEqual } from 'node:crypto';
import type { BlockList } from 'node:net';
import { quoteForEcho } from '../answers/echo.js';
import { compileAddressBlocks, inBlocks } from './client-address.js';

/** What an agent asks the edge to enforce on its public URL (sent in its HELLO). */
export interface PublicProtection {
  /** SHA-256 (hex) of `user:password`; the password itself never leaves the agent. */
  basicAuthSha256?: string;
  /** Client addresses allowed, as CIDR blocks or single addresses. */
  allowIps?: string[];
}

export type ProtectionVerdict = { ok: true } | { ok: false; status: 401 | 403; message: string };

export interface CompiledProtection {
  /**
   * `clientAddress` is the normalized client address the edge decided on: the connection's peer, or
   * what a trusted proxy in front says (see client-address.ts).
   */
  check(authorization: string | undefined, clientAddress: string): ProtectionVerdict;
}

/** Validates the agent's settings once per session, so each request only does lookups. */
export function compileProtection(input: unknown): CompiledProtection | { error: string } | undefined {
  if (input === undefined || input === null) return undefined;
  if (typeof input !== 'object') return { error: 'protection must be an object' };
  const { basicAuthSha256, allowIps } = input as PublicProtection;
  let expected: Buffer | undefined;
  if (basicAuthSha256 !== undefined) {
    if (typeof basicAuthSha256 !== 'string' || !/^[0-9a-f]{64}$/.test(basicAuthSha256)) {
      return { error: 'basicAuthSha256 must be 64 hex characters' };
    }
    expected = Buffer.from(basicAuthSha256, 'hex');
  }
  let allowed: BlockList | undefined;
  if (allowIps !== undefined) {
    if (!Array.isArray(allowIps)) return { error: 'allowIps must be a list' };
    const compiled = compileAddressBlocks(allowIps);
    if ('invalid' in compiled) {
      return { error: `allowIps entry "${compiled.invalid}" is not an IP address or CIDR block` };
    }
    allowed = compiled;
  }
  if (expected === undefined && allowed === undefined) return undefined;
  return {
    check(authorization, clientAddress) {
      if (allowed !== undefined && !inBlocks(allowed, clientAddress)) {
        return {
          ok: false,
          status: 403,
          message: `forbidden: ${quoteForEcho(clientAddress, 64)} is not allowed by this tunnel`,
        };
      }
      if (expected !== undefined) {
        const given = credentialsDigest(authorization);
        if (given === undefined || !timingSafeEqual(given, expected)) {
          return { ok: false, status: 401, message: 'this tunnel requires a user name and password' };
        }
      }
      return { ok: true };
    },
  };
}

function credentialsDigest(header: string | undefined): Buffer | undefined {
  if (header === undefined) return undefined;
  const match = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(header);
  if (!match) return undefined;
  return createHash('sha256').update(Buffer.from(match[1]!, 'base64').toString('utf8')).digest();
}
