import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * A self-signed EC P-256 certificate made with the openssl CLI, written as `<dir>/<name>.crt` and
 * `<dir>/<name>.key`: CN `cn`, and the SAN entries given (`DNS:a,IP:b`; none: a certificate without SAN).
 */
export async function selfSigned(
  dir: string,
  name: string,
  subject: { cn: string; san?: string },
): Promise<{ cert: string; key: string }> {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  await promisify(execFile)('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    key,
    '-out',
    cert,
    '-days',
    '1',
    '-subj',
    `/CN=${subject.cn}`,
    ...(subject.san === undefined ? [] : ['-addext', `subjectAltName=${subject.san}`]),
  ]);
  return { cert, key };
}
