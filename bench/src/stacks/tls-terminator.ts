import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { accepts, findCommand, freePort } from '@tunnel2/test-services';
import { BenchError, BenchErrorCode } from '../errors.js';

/*
 * `pnpm bench tls`'s two native pieces: a throw-away certificate (openssl, ECDSA P-256, for localhost,
 * *.localhost and 127.0.0.1) and Debian's HAProxy terminating TLS (ALPN h2 and http/1.1, keep-alive) in
 * front of a plain edge, as an operator runs one. Both live in one temp dir that close() removes.
 */

export interface TlsFiles {
  dir: string;
  certPath: string;
  keyPath: string;
  /** Certificate and key in one file, as HAProxy's `crt` takes them. */
  pemPath: string;
}

const run = promisify(execFile);

export async function makeCertificate(): Promise<TlsFiles> {
  const openssl = findCommand('openssl', 'openssl');
  const dir = await mkdtemp(join(tmpdir(), 'tunnel2-bench-tls-'));
  const certPath = join(dir, 'cert.pem');
  const keyPath = join(dir, 'key.pem');
  const pemPath = join(dir, 'haproxy.pem');
  try {
    await run(openssl, [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '2',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost,DNS:*.localhost,IP:127.0.0.1',
      '-keyout',
      keyPath,
      '-out',
      certPath,
    ]);
    await writeFile(pemPath, `${await readFile(certPath, 'utf8')}${await readFile(keyPath, 'utf8')}`);
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw new BenchError(BenchErrorCode.STACK, 'openssl could not make a test certificate', { cause: err });
  }
  return { dir, certPath, keyPath, pemPath };
}

export interface TlsTerminator {
  readonly pid: number;
  /** https://127.0.0.1:<port> */
  readonly url: string;
  stop(): Promise<void>;
}

/** HAProxy on a free port terminating TLS for `edgePort`; resolves once it accepts connections. */
export async function startTlsTerminator(files: TlsFiles, edgePort: number): Promise<TlsTerminator> {
  // findCommand also looks in /usr/sbin, where Debian puts HAProxy (not on every PATH).
  const bin = findCommand('haproxy', 'haproxy');
  const port = await freePort();
  const config = join(files.dir, 'haproxy.cfg');
  await writeFile(
    config,
    [
      'global',
      '  maxconn 4000',
      '  ssl-default-bind-options ssl-min-ver TLSv1.2',
      'defaults',
      '  mode http',
      '  timeout connect 5s',
      '  timeout client 60s',
      '  timeout server 60s',
      '  timeout tunnel 1h',
      '  option forwardfor',
      // Keep-alive on both sides: a connection per request to the edge would measure TCP set-up, not TLS.
      '  option http-keep-alive',
      'frontend public',
      `  bind 127.0.0.1:${port} ssl crt ${files.pemPath} alpn h2,http/1.1`,
      '  http-request set-header X-Forwarded-Proto https',
      // h2 clients reach the edge over h2c (its plain port takes the preface), HTTP/1.1 ones over HTTP/1.1:
      // each protocol on both hops, as a terminator in front of an h2c-capable edge is set up.
      '  use_backend edge_h2 if { ssl_fc_alpn -i h2 }',
      '  default_backend edge',
      'backend edge',
      `  server edge 127.0.0.1:${edgePort}`,
      'backend edge_h2',
      `  server edge 127.0.0.1:${edgePort} proto h2`,
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn(bin, ['-db', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  child.on('error', () => {});
  const exited = once(child, 'exit');
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  for (let attempt = 0; attempt < 400; attempt += 1) {
    if (child.exitCode !== null) break;
    if (await accepts(port)) return { pid: child.pid!, url: `https://127.0.0.1:${port}`, stop };
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  child.kill('SIGKILL');
  await exited;
  throw new BenchError(BenchErrorCode.STACK, `HAProxy did not listen on ${port}: ${stderr.trim()}`);
}
