import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

export interface AgentAuthOptions {
  /** Static tokens accepted from agents. */
  tokens?: readonly string[];
  /** Secret for signed tokens (`t2.<claims>.<hmac>`), minted with `createSignedToken`. */
  tokenSecret?: string;
  /** Accept agents without a token. Must be said explicitly when tokens or a secret are configured too. */
  allowAnonymous?: boolean;
}

export type AuthResult =
  | { ok: true; identity: string; anonymous: boolean }
  | { ok: false; reason: 'missing' | 'invalid' | 'expired' };

interface SignedClaims {
  /** Who the token stands for: every token of one subject owns the same names. */
  sub: string;
  /** Expiry, seconds since the epoch. */
  exp: number;
}

const PREFIX = 't2.';

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

function sign(secret: string, claims: string): Buffer {
  return createHmac('sha256', secret).update(`${PREFIX}${claims}`).digest();
}

/** Mints a signed agent token for `subject`, valid for `ttlSeconds`. */
export function createSignedToken(
  secret: string,
  subject: string,
  ttlSeconds: number,
  now = Date.now(),
): string {
  const claims: SignedClaims = { sub: subject, exp: Math.floor(now / 1000) + ttlSeconds };
  const encoded = Buffer.from(JSON.stringify(claims)).toString('base64url');
  return `${PREFIX}${encoded}.${sign(secret, encoded).toString('base64url')}`;
}

/**
 * Checks agent tokens. Every comparison is between fixed-length digests with timingSafeEqual (which throws
 * on unequal lengths, so raw tokens are never compared directly), and nothing here logs a token.
 */
export function createAgentAuthenticator(options: AgentAuthOptions, clock: () => number = Date.now) {
  const staticDigests = (options.tokens ?? []).map(digest);
  const secret = options.tokenSecret;
  const anonymous = options.allowAnonymous === true;

  function checkSigned(token: string): AuthResult | undefined {
    if (secret === undefined || !token.startsWith(PREFIX)) return undefined;
    const [claims, mac] = token.slice(PREFIX.length).split('.');
    if (claims === undefined || mac === undefined) return { ok: false, reason: 'invalid' };
    const expected = sign(secret, claims);
    const given = Buffer.from(mac, 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected))
      return { ok: false, reason: 'invalid' };
    let parsed: Partial<SignedClaims>;
    try {
      parsed = JSON.parse(Buffer.from(claims, 'base64url').toString('utf8')) as Partial<SignedClaims>;
    } catch {
      return { ok: false, reason: 'invalid' };
    }
    if (typeof parsed.sub !== 'string' || typeof parsed.exp !== 'number')
      return { ok: false, reason: 'invalid' };
    if (parsed.exp * 1000 <= clock()) return { ok: false, reason: 'expired' };
    return { ok: true, identity: `sub:${parsed.sub}`, anonymous: false };
  }

  return {
    get requiresToken(): boolean {
      return !anonymous;
    },
    check(token: string | undefined, agentKey: string | undefined): AuthResult {
      if (token === undefined || token === '') {
        if (anonymous) return { ok: true, identity: `anon:${agentKey ?? ''}`, anonymous: true };
        return { ok: false, reason: 'missing' };
      }
      const signed = checkSigned(token);
      if (signed !== undefined) return signed;
      const given = digest(token);
      let match = false;
      // Compare against every configured token, so the time taken does not say which one matched.
      for (const candidate of staticDigests) match = timingSafeEqual(given, candidate) || match;
      if (match) return { ok: true, identity: `token:${given.toString('base64url')}`, anonymous: false };
      return { ok: false, reason: 'invalid' };
    },
  };
}

export type AgentAuthenticator = ReturnType<typeof createAgentAuthenticator>;
