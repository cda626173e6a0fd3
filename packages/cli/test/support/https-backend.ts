import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { promisify } from 'node:util';
import { findCommand } from '@tunnel2/test-services';
import { WebSocketServer } from 'ws';

const run = promisify(execFile);

/** PEM key and certificate. */
export interface KeyPair {
  key: string;
  cert: string;
}

export interface TestCertificates {
  /** Self-signed, for localhost and 127.0.0.1 (a dev server's `--https`). */
  selfSigned: KeyPair;
  /** A private CA (mkcert's rootCA.pem) ... */
  ca: { cert: string; file: string };
  /** ... and a server certificate it signed, for localhost and 127.0.0.1 only. */
  signed: KeyPair;
  /** A file that is not PEM at all. */
  notPemFile: string;
  dispose(): Promise<void>;
}

const SAN = 'subjectAltName=DNS:localhost,IP:127.0.0.1';

/** Generates the certificates with the openssl CLI in a temporary directory (EC keys: fast). */
export async function makeCertificates(): Promise<TestCertificates> {
  const dir = await mkdtemp(join(tmpdir(), 'tunnel2-tls-'));
  const p = (name: string): string => join(dir, name);
  const ecKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await run(findCommand('openssl', 'openssl'), [
    'req',
    '-x509',
    ...ecKey,
    '-keyout',
    p('self.key'),
    '-out',
    p('self.crt'),
    '-days',
    '2',
    '-subj',
    '/CN=localhost',
    '-addext',
    SAN,
  ]);
  await run(findCommand('openssl', 'openssl'), [
    'req',
    '-x509',
    ...ecKey,
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
  await run(findCommand('openssl', 'openssl'), [
    'req',
    '-new',
    ...ecKey,
    '-keyout',
    p('srv.key'),
    '-out',
    p('srv.csr'),
    '-subj',
    '/CN=localhost',
  ]);
  await writeFile(p('srv.ext'), `${SAN}\n`);
  await run(findCommand('openssl', 'openssl'), [
    'x509',
    '-req',
    '-in',
    p('srv.csr'),
    '-CA',
    p('ca.crt'),
    '-CAkey',
    p('ca.key'),
    '-CAcreateserial',
    '-out',
    p('srv.crt'),
    '-days',
    '2',
    '-extfile',
    p('srv.ext'),
  ]);
  await writeFile(p('not.pem'), 'this is not a certificate\n');
  const read = (name: string): Promise<string> => readFile(p(name), 'utf8');
  return {
    selfSigned: { key: await read('self.key'), cert: await read('self.crt') },
    ca: { cert: await read('ca.crt'), file: p('ca.crt') },
    signed: { key: await read('srv.key'), cert: await read('srv.crt') },
    notPemFile: p('not.pem'),
    dispose: () => rm(dir, { recursive: true, force: true }),
  };
}

/** What the HTTPS backend saw of one request. */
export interface SeenRequest {
  url: string;
  host: string | undefined;
  /** The SNI the client sent (false when none). */
  servername: string | false;
}

export interface HttpsBackend {
  port: number;
  server: Server;
  seen: SeenRequest[];
  close(): Promise<void>;
}

/**
 * A real node:https server: answers every request with what it saw (JSON: url, Host, SNI) and echoes
 * WebSocket messages on `/echo`.
 */
export async function startHttpsBackend(pair: KeyPair): Promise<HttpsBackend> {
  const seen: SeenRequest[] = [];
  const note = (url: string | undefined, host: string | undefined, socket: TLSSocket): SeenRequest => {
    const entry = { url: url ?? '/', host, servername: socket.servername ?? false };
    seen.push(entry);
    return entry;
  };
  const server = createServer(pair, (req, res) => {
    const entry = note(req.url, req.headers.host, req.socket as TLSSocket);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(entry));
  });
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  server.on('upgrade', (req, socket, head) => {
    note(req.url, req.headers.host, socket as TLSSocket);
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
    });
  });
  // A refused handshake is the client's business; it must not end the test process.
  server.on('tlsClientError', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    server,
    seen,
    async close() {
      for (const ws of wss.clients) ws.terminate();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
