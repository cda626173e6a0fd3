import type { ConnectionOptions } from 'node:tls';
import { AgentError, AgentErrorCode } from '../errors.js';
import { readUserFile } from '../user-file.js';
import type { BackendErrorAnswer } from './backend-error-answer.js';

// Not an `import`: an ESM import of node:crypto reads every export, and its `webcrypto` getter loads Web
// Crypto, which the agent never uses (bench/README.md, issue #34: the workspace agent's idle RSS).
const { X509Certificate } = process.getBuiltinModule('node:crypto');
// Not an `import`: an ESM import of node:net reads every export, and its `BlockList` and `SocketAddress`
// getters load both, which the agent never uses (bench/README.md, issue #34: the workspace agent's idle RSS).
const { isIP } = process.getBuiltinModule('node:net');

/** How the agent checks an `https://` target's certificate. */
export interface TargetTls {
  /** False with `--insecure`: every certificate is accepted (a local dev server's self-signed one). */
  rejectUnauthorized: boolean;
  /** PEM of CAs trusted besides Node's bundled ones (`--ca <file>`). */
  ca: string | undefined;
}

/**
 * Checks that `pem` holds at least one certificate and that each one parses. `source` names where it came
 * from (the file) in the error, so that a wrong file is found before the first request, not at it.
 */
export function validateCaPem(pem: string, source: string): string {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  const invalid = (why: string, cause?: unknown): AgentError =>
    new AgentError(AgentErrorCode.INVALID_OPTION, `--ca ${source}: ${why}`, { cause });
  if (blocks.length === 0) throw invalid('no PEM certificate in it (expected -----BEGIN CERTIFICATE-----)');
  for (const block of blocks) {
    try {
      new X509Certificate(block);
    } catch (err) {
      throw invalid('a certificate in it is not valid PEM', err);
    }
  }
  return pem;
}

/**
 * Reads `--ca <file>` once, at start: unreadable, not a regular file, larger than 1 MiB (a CA bundle is
 * kilobytes) or not a PEM certificate → an error naming the file.
 */
export function readCaFile(file: string): string {
  const read = readUserFile(file);
  if (!read.ok) {
    throw new AgentError(AgentErrorCode.INVALID_OPTION, `--ca ${file}: ${read.problem}`, {
      cause: read.cause,
    });
  }
  return validateCaPem(read.text, file);
}

/** The TLS settings of a target: undefined for `http://` (where --insecure and --ca mean nothing). */
export function resolveTargetTls(
  origin: string,
  options: { insecure?: boolean | undefined; ca?: string | Buffer | undefined },
): TargetTls | undefined {
  if (!origin.startsWith('https:')) {
    if (options.insecure || options.ca !== undefined) {
      throw new AgentError(
        AgentErrorCode.INVALID_OPTION,
        '--insecure and --ca apply to https:// targets only (e.g. https://localhost:8443)',
      );
    }
    return undefined;
  }
  const ca = options.ca === undefined ? undefined : validateCaPem(String(options.ca), 'option');
  return { rejectUnauthorized: options.insecure !== true, ca };
}

/**
 * The name sent as SNI, which is also the name the certificate is checked against: the host of the Host
 * header the target receives (so it follows --host-header, as undici does on its own path), none for an
 * IP address (TLS forbids one in SNI; the certificate is then checked against the address).
 */
export function serverNameOf(forwardedHeaders: readonly string[]): string {
  for (let i = 0; i < forwardedHeaders.length; i += 2) {
    if (forwardedHeaders[i]!.toLowerCase() !== 'host') continue;
    const value = forwardedHeaders[i + 1]!.trim();
    const host = value.startsWith('[') ? value.slice(1, value.indexOf(']')) : value.replace(/:\d*$/, '');
    return isIP(host) === 0 ? host : '';
  }
  return '';
}

/** The undici pool's options for an https:// target (HTTP/1.1 only, as towards an http:// one). */
export function poolTlsOptions(tls: TargetTls): {
  connect: { rejectUnauthorized: boolean; ca?: string };
  allowH2: false;
} {
  // undici sends SNI from each request's Host header, which serverNameOf reproduces for node:https. h2 is
  // off so that interim responses, trailers and upgrades take the same path whatever the target offers.
  const connect = {
    rejectUnauthorized: tls.rejectUnauthorized,
    ...(tls.ca === undefined ? {} : { ca: tls.ca }),
  };
  return { connect, allowH2: false };
}

/** Options for node:https (upgrades, Expect: 100-continue, inspector replays) matching the undici pool's. */
export function httpsOptions(tls: TargetTls, forwardedHeaders: readonly string[]): ConnectionOptions {
  const servername = serverNameOf(forwardedHeaders);
  return {
    rejectUnauthorized: tls.rejectUnauthorized,
    ...(tls.ca === undefined ? {} : { ca: tls.ca }),
    // '' sends no SNI; undefined would let node:https pick one from options it cannot see here.
    servername,
  };
}

/** OpenSSL's verification codes and Node's host check, with what each means to the user. */
const certificateProblems: Readonly<Record<string, string>> = {
  DEPTH_ZERO_SELF_SIGNED_CERT: 'is self-signed',
  SELF_SIGNED_CERT_IN_CHAIN: 'is signed by an untrusted (self-signed) CA',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'is signed by an unknown CA',
  UNABLE_TO_GET_ISSUER_CERT: 'is signed by an unknown CA',
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 'is signed by an unknown CA',
  CERT_UNTRUSTED: 'is not trusted',
  CERT_HAS_EXPIRED: 'has expired',
  CERT_NOT_YET_VALID: 'is not valid yet',
  ERR_TLS_CERT_ALTNAME_INVALID: 'does not name the host it was reached as',
  CERT_SIGNATURE_FAILURE: 'has an invalid signature',
  CERT_REVOKED: 'is revoked',
  INVALID_CA: 'has an invalid CA in its chain',
};

/**
 * A TLS failure towards an `https://` target as the answer the public client gets (502,
 * TUNNEL2_ERR_TARGET_TLS) and the agent's request line: what failed and which flag fixes it.
 * Undefined for errors that are not TLS ones.
 */
export function describeTlsError(code: string, host: string): BackendErrorAnswer | undefined {
  const problem = certificateProblems[code];
  if (problem !== undefined) {
    return {
      status: 502,
      message:
        `tunnel2: the certificate of https://${host} ${problem} (${code}); ` +
        'run with --insecure to accept it, or --ca <file> to trust the CA that signed it',
      code: 'TUNNEL2_ERR_TARGET_TLS',
    };
  }
  if (code.startsWith('ERR_SSL_') || code === 'EPROTO' || code.startsWith('ERR_TLS_')) {
    return {
      status: 502,
      message: `tunnel2: TLS with https://${host} failed (${code}); is the target serving HTTPS on that port?`,
      code: 'TUNNEL2_ERR_TARGET_TLS',
    };
  }
  return undefined;
}
