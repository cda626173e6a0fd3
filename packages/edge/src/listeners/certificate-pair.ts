import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { createSecureContext, type SecureContext } from 'node:tls';
import { EdgeError, EdgeErrorCode } from '../errors.js';
import type { CertificateFiles } from '../settings/edge-options.js';

export type { CertificateFiles };

/** One pair, read and checked: the context handshakes use, and the names SNI chooses it by. */
export interface CertificatePair {
  readonly files: CertificateFiles;
  readonly context: SecureContext;
  /** DNS names of the certificate (its SAN DNS entries, else its CN), canonical; `*.x` for a wildcard. */
  readonly names: readonly string[];
  readonly subject: string;
  /** When the certificate stops being valid (its notAfter). */
  readonly notAfter: Date;
  /** The PEM bytes read, to tell a file event that changed nothing from a new certificate. */
  readonly pem: { cert: Buffer; key: Buffer };
}

/** A certificate chain and a key are kilobytes; this bound keeps a wrong path (/dev/zero) from filling memory. */
const MAX_PEM_BYTES = 1024 * 1024;

/** Why a pair was not loaded, naming the setting and the file: the one line a failed start prints. */
export class CertificateProblem extends EdgeError {
  readonly file: string;

  constructor(setting: 'tlsCert' | 'tlsKey', file: string, problem: string, options?: ErrorOptions) {
    super(EdgeErrorCode.INVALID_CONFIG, `invalid setting ${setting}=${file}: ${problem}`, options);
    this.file = file;
  }
}

/**
 * Reads a PEM file synchronously (the edge is being built; a reload reads between handshakes): only a
 * regular file of at most 1 MiB, checked on the opened descriptor. Opened non-blocking: a FIFO with no
 * writer would otherwise block the event loop here, at start or at a reload, for good.
 */
function readPem(setting: 'tlsCert' | 'tlsKey', path: string): Buffer {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    throw new CertificateProblem(setting, path, `cannot read it (${(err as NodeJS.ErrnoException).code})`, {
      cause: err,
    });
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) throw new CertificateProblem(setting, path, 'not a regular file');
    if (stats.size > MAX_PEM_BYTES) throw new CertificateProblem(setting, path, 'larger than 1 MiB');
    const buffer = Buffer.alloc(stats.size);
    let total = 0;
    while (total < buffer.length) {
      const read = readSync(fd, buffer, total, buffer.length - total, null);
      if (read === 0) break;
      total += read;
    }
    return buffer.subarray(0, total);
  } finally {
    closeSync(fd);
  }
}

/** A DNS name as SNI names are compared: lower case, without the trailing dot of an absolute name. */
function canonicalName(name: string): string {
  return name.toLowerCase().replace(/\.$/, '');
}

/** The DNS names a certificate is valid for: its SAN DNS entries, else (an old certificate) its CN. */
function namesOf(cert: X509Certificate): string[] {
  const names: string[] = [];
  for (const entry of (cert.subjectAltName ?? '').split(',')) {
    const trimmed = entry.trim();
    if (trimmed.startsWith('DNS:')) names.push(canonicalName(trimmed.slice(4)));
  }
  if (names.length > 0) return names;
  const cn = /(?:^|\n)CN=([^\n]+)/.exec(cert.subject)?.[1];
  return cn === undefined ? [] : [canonicalName(cn)];
}

/** Reads and checks one pair; throws a CertificateProblem naming the setting and the file. */
export function loadCertificatePair(files: CertificateFiles): CertificatePair {
  const certPem = readPem('tlsCert', files.cert);
  const keyPem = readPem('tlsKey', files.key);
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(certPem);
  } catch (err) {
    throw new CertificateProblem('tlsCert', files.cert, 'not a PEM certificate', { cause: err });
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(keyPem);
  } catch (err) {
    throw new CertificateProblem('tlsKey', files.key, 'not an unencrypted PEM private key', { cause: err });
  }
  if (key.type !== 'private' || !cert.checkPrivateKey(key)) {
    throw new CertificateProblem('tlsKey', files.key, `is not the key of the certificate ${files.cert}`);
  }
  let context: SecureContext;
  try {
    // The whole file: the server certificate and the intermediates after it go out as the chain.
    context = createSecureContext({ cert: certPem, key: keyPem });
  } catch (err) {
    throw new CertificateProblem('tlsCert', files.cert, `not usable (${(err as Error).message})`, {
      cause: err,
    });
  }
  return {
    files,
    context,
    names: namesOf(cert),
    subject: cert.subject.replaceAll('\n', ', '),
    notAfter: cert.validToDate,
    pem: { cert: certPem, key: keyPem },
  };
}

/**
 * The pair whose certificate names `name`: exactly, else by a wildcard that covers it (`*.example.com`
 * covers one label: `a.example.com`, not `example.com` nor `a.b.example.com`, as RFC 6125 and browsers
 * have it). Undefined when none does.
 */
export function coveringPair<P extends Pick<CertificatePair, 'names'>>(
  pairs: readonly P[],
  name: string,
): P | undefined {
  const canonical = canonicalName(name);
  const exact = pairs.find((pair) => pair.names.includes(canonical));
  if (exact !== undefined) return exact;
  const dot = canonical.indexOf('.');
  if (dot <= 0) return undefined;
  const wildcard = `*${canonical.slice(dot)}`;
  return pairs.find((pair) => pair.names.includes(wildcard));
}

/**
 * The pair for a TLS client's SNI name: the one covering it (coveringPair), else the first pair (no SNI,
 * an IP address, an unknown name).
 */
export function choosePair<P extends Pick<CertificatePair, 'names'>>(
  pairs: readonly P[],
  servername: string | undefined,
): P | undefined {
  const covering =
    servername === undefined || servername === '' ? undefined : coveringPair(pairs, servername);
  return covering ?? pairs[0];
}
