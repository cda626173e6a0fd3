import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { promisify } from 'node:util';
import { findCommand, makeTestCa } from '@tunnel2/test-services';
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

/** Generates the certificates with the openssl CLI in a temporary directory (EC keys: fast). */
export async function makeCertificates(): Promise<TestCertificates> {
  // The private CA and the certificate it signs are test-services' (the edge's TLS tests use the same).
  const ca = await makeTestCa();
  const p = (name: string): string => join(ca.dir, name);
  await run(findCommand('openssl', 'openssl'), [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    p('self.key'),
    '-out',
    p('self.crt'),
    '-days',
    '2',
    '-subj',
    '/CN=localhost',
    '-addext',
    'subjectAltName=DNS:localhost,IP:127.0.0.1',
  ]);
  const signed = await ca.issue('srv', ['localhost', '127.0.0.1']);
  await writeFile(p('not.pem'), 'this is not a certificate\n');
  return {
    selfSigned: { key: await readFile(p('self.key'), 'utf8'), cert: await readFile(p('self.crt'), 'utf8') },
    ca: ca.ca,
    signed: { key: signed.key, cert: signed.cert },
    notPemFile: p('not.pem'),
    dispose: () => ca.dispose(),
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
