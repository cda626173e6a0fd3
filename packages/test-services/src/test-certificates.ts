import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { findCommand } from './native-process.js';

/*
 * Certificates for tests that serve TLS for real (the edge's TLS port, h2 over TLS, wss agents): a private
 * CA made with Debian's openssl CLI in a temporary folder, and server certificates it signs for the names a
 * test asks for. Clients trust the CA (`ca` option, or NODE_EXTRA_CA_CERTS=<ca.file> for a child process);
 * nothing is trusted system-wide. EC P-256 keys: each certificate takes milliseconds.
 */

const run = promisify(execFile);

/** A certificate and its key, as PEM text and as the files the edge is given. */
export interface IssuedCertificate {
  cert: string;
  key: string;
  certFile: string;
  keyFile: string;
}

export interface TestCa {
  /** The folder every file is made in (removed by dispose). */
  readonly dir: string;
  /** The CA's certificate (PEM) and its file, for `ca:` or NODE_EXTRA_CA_CERTS. */
  readonly ca: { cert: string; file: string };
  /**
   * A server certificate signed by the CA for `names` (DNS names, `*.example.com` wildcards, or IP
   * addresses), written as `<file>.crt` and `<file>.key`; the first name is also the subject's CN.
   */
  issue(file: string, names: readonly string[]): Promise<IssuedCertificate>;
  dispose(): Promise<void>;
}

const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

function sanOf(names: readonly string[]): string {
  const ip = /^[\d.]+$|:/;
  return `subjectAltName=${names.map((name) => (ip.test(name) ? `IP:${name}` : `DNS:${name}`)).join(',')}`;
}

/** A new private CA in a temporary folder. */
export async function makeTestCa(): Promise<TestCa> {
  const openssl = findCommand('openssl', 'openssl');
  const dir = await mkdtemp(join(tmpdir(), 'tunnel2-ca-'));
  const p = (name: string): string => join(dir, name);
  await run(openssl, [
    'req',
    '-x509',
    ...EC_KEY,
    '-keyout',
    p('ca.key'),
    '-out',
    p('ca.crt'),
    '-days',
    '2',
    '-subj',
    '/CN=tunnel2 test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign',
  ]);
  let serial = 1;
  return {
    dir,
    ca: { cert: await readFile(p('ca.crt'), 'utf8'), file: p('ca.crt') },
    async issue(file, names) {
      const certFile = p(`${file}.crt`);
      const keyFile = p(`${file}.key`);
      const ext = p(`${file}.ext`);
      await writeFile(ext, `${sanOf(names)}\n`);
      await run(openssl, [
        'req',
        '-new',
        ...EC_KEY,
        '-keyout',
        keyFile,
        '-out',
        p(`${file}.csr`),
        '-subj',
        `/CN=${names[0] ?? 'localhost'}`,
      ]);
      await run(openssl, [
        'x509',
        '-req',
        '-in',
        p(`${file}.csr`),
        '-CA',
        p('ca.crt'),
        '-CAkey',
        p('ca.key'),
        '-set_serial',
        String(serial++),
        '-out',
        certFile,
        '-days',
        '2',
        '-extfile',
        ext,
      ]);
      return {
        cert: await readFile(certFile, 'utf8'),
        key: await readFile(keyFile, 'utf8'),
        certFile,
        keyFile,
      };
    },
    dispose: () => rm(dir, { recursive: true, force: true }),
  };
}
