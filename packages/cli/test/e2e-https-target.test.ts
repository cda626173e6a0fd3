import { once } from 'node:events';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type ConnectOptions, connect, type RequestReport, type Tunnel } from '../src/index.js';
import { send } from './support/http-client.js';
import {
  type HttpsBackend,
  makeCertificates,
  startHttpsBackend,
  type TestCertificates,
} from './support/https-backend.js';
import { cli, spawnCli } from './support/processes.js';
import { silent } from './support/stack.js';

let certs: TestCertificates;
let selfSigned: HttpsBackend;
let caSigned: HttpsBackend;
let edge: Edge;
let port: number;
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  certs = await makeCertificates();
  selfSigned = await startHttpsBackend(certs.selfSigned);
  caSigned = await startHttpsBackend(certs.signed);
  edge = buildEdge({ port: 0, logger: silent });
  ({ port } = await edge.listen());
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  selfSigned.seen.length = 0;
  caSigned.seen.length = 0;
});
afterAll(async () => {
  await edge.close(0);
  await selfSigned.close();
  await caSigned.close();
  await certs.dispose();
});

/** An agent for `https://<host>:<port>` named `name`, with the request reports it made. */
async function tunnelTo(
  backend: HttpsBackend,
  name: string,
  options: Partial<ConnectOptions> = {},
  host = 'localhost',
): Promise<{ tunnel: Tunnel; reports: RequestReport[] }> {
  const tunnel = await connect({
    target: `https://${host}:${backend.port}`,
    server: edge.url,
    subdomain: name,
    ...options,
  });
  cleanups.push(() => tunnel.close(0));
  const reports: RequestReport[] = [];
  tunnel.on('request', (r) => reports.push(r));
  return { tunnel, reports };
}

const get = (name: string, path = '/hello') =>
  send({ port, path, headers: ['Host', `${name}.localhost:${port}`] });

describe('an https:// target with a self-signed certificate', () => {
  it('is refused without --insecure: 502 TUNNEL2_ERR_TARGET_TLS, and the request report names the flags', async () => {
    const { reports } = await tunnelTo(selfSigned, 'tls-strict');
    const res = await get('tls-strict');
    expect(res.status).toBe(502);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_TARGET_TLS');
    const body = res.body.toString();
    expect(body).toContain('is self-signed (DEPTH_ZERO_SELF_SIGNED_CERT)');
    expect(body).toContain('--insecure');
    expect(body).toContain('--ca <file>');
    expect(reports).toHaveLength(1);
    expect(reports[0]).toMatchObject({ status: 502, error: expect.stringContaining('--insecure') });
    expect(selfSigned.seen).toHaveLength(0);
  });

  it('works with insecure: Host and SNI are the target host (rewrite)', async () => {
    await tunnelTo(selfSigned, 'tls-insecure', { insecure: true });
    const res = await get('tls-insecure');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body.toString())).toEqual({
      url: '/hello',
      host: `localhost:${selfSigned.port}`,
      servername: 'localhost',
    });
  });

  it('with --host-header preserve, Host and SNI are the public host', async () => {
    await tunnelTo(selfSigned, 'tls-preserve', { insecure: true, hostHeader: 'preserve' });
    const res = await get('tls-preserve');
    expect(JSON.parse(res.body.toString())).toMatchObject({
      host: `tls-preserve.localhost:${port}`,
      servername: 'tls-preserve.localhost',
    });
  });

  it('an IP address target sends no SNI', async () => {
    await tunnelTo(selfSigned, 'tls-ip', { insecure: true }, '127.0.0.1');
    const res = await get('tls-ip');
    expect(JSON.parse(res.body.toString())).toMatchObject({
      host: `127.0.0.1:${selfSigned.port}`,
      servername: false,
    });
  });

  it('carries a WebSocket upgrade with insecure, and refuses it with the TLS code without', async () => {
    await tunnelTo(selfSigned, 'tls-ws', { insecure: true });
    const ws = new WebSocket(`ws://127.0.0.1:${port}/echo`, {
      headers: { host: `tls-ws.localhost:${port}` },
    });
    cleanups.push(() => ws.terminate());
    await once(ws, 'open');
    ws.send('over tls');
    const [data] = await once(ws, 'message');
    expect(String(data)).toBe('over tls');
    expect(selfSigned.seen.at(-1)).toMatchObject({ url: '/echo', servername: 'localhost' });

    await tunnelTo(selfSigned, 'tls-ws-strict');
    const refused = new WebSocket(`ws://127.0.0.1:${port}/echo`, {
      headers: { host: `tls-ws-strict.localhost:${port}` },
    });
    // After a refused handshake, terminate() reports the socket closed before opening: expected here.
    refused.on('error', () => {});
    cleanups.push(() => refused.terminate());
    const [, response] = (await once(refused, 'unexpected-response')) as [
      unknown,
      { statusCode: number; headers: Record<string, string> },
    ];
    expect(response.statusCode).toBe(502);
    expect(response.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_TARGET_TLS');
  });

  it("the inspector's replay reaches the target with the same certificate settings", async () => {
    const { tunnel } = await tunnelTo(selfSigned, 'tls-replay', { insecure: true, inspect: { port: 0 } });
    expect((await get('tls-replay', '/original')).status).toBe(200);
    const base = tunnel.inspectorUrl!;
    const list = (await (await fetch(`${base}/api/entries`)).json()) as { entries: { id: string }[] };
    const replayed = await fetch(`${base}/api/entries/${list.entries[0]!.id}/replay`, { method: 'POST' });
    expect(replayed.status).toBe(200);
    expect(await replayed.json()).toMatchObject({ entry: { status: 200, path: '/original' } });
    expect(selfSigned.seen.map((s) => s.url)).toEqual(['/original', '/original']);
    expect(selfSigned.seen[1]).toMatchObject({ servername: 'localhost' });
  });
});

describe('an https:// target signed by a private CA', () => {
  it('is refused without the CA, and works with it', async () => {
    await tunnelTo(caSigned, 'ca-missing');
    const refused = await get('ca-missing');
    expect(refused.status).toBe(502);
    expect(refused.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_TARGET_TLS');
    expect(refused.body.toString()).toContain('signed by an unknown CA');

    await tunnelTo(caSigned, 'ca-given', { ca: certs.ca.cert });
    const res = await get('ca-given');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body.toString())).toMatchObject({ servername: 'localhost' });
  });

  it('still checks the host name: SNI the certificate does not name is refused, with that reason', async () => {
    // preserve: the certificate (localhost, 127.0.0.1) is checked against the public host.
    await tunnelTo(caSigned, 'ca-preserve', { ca: certs.ca.cert, hostHeader: 'preserve' });
    const res = await get('ca-preserve');
    expect(res.status).toBe(502);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_TARGET_TLS');
    expect(res.body.toString()).toContain(
      'does not name the host it was reached as (ERR_TLS_CERT_ALTNAME_INVALID)',
    );
    expect(caSigned.seen).toHaveLength(0);
  });
});

describe('the CLI', () => {
  it('--ca with an unreadable or non-PEM file exits 2 naming the file', async () => {
    const missing = await cli(['http', 'https://localhost:8443', '--ca', '/nonexistent/ca.pem']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toBe('tunnel2: --ca /nonexistent/ca.pem: cannot read it (ENOENT)\n');
    const notPem = await cli(['http', 'https://localhost:8443', '--ca', certs.notPemFile]);
    expect(notPem.code).toBe(2);
    expect(notPem.stderr).toContain(`--ca ${certs.notPemFile}: no PEM certificate in it`);
  });

  it('--insecure on an http:// target exits 2', async () => {
    const { code, stderr } = await cli(['http', '3000', '--insecure']);
    expect(code).toBe(2);
    expect(stderr).toContain('--insecure and --ca apply to https:// targets only');
  });

  it('--json request events name the failure, and --ca <file> makes it work', async () => {
    const target = `https://localhost:${caSigned.port}`;
    const strict = spawnCli([
      'http',
      target,
      '--server',
      edge.url,
      '--subdomain',
      'cli-strict',
      '--json',
      '--no-inspect',
    ]);
    cleanups.push(() => strict.kill('SIGKILL'));
    await strict.waitFor('ready');
    expect((await get('cli-strict')).status).toBe(502);
    expect(await strict.waitFor('request')).toMatchObject({
      status: 502,
      error: expect.stringMatching(/UNABLE_TO_VERIFY_LEAF_SIGNATURE.*--insecure.*--ca <file>/),
    });

    const trusting = spawnCli([
      'http',
      target,
      '--server',
      edge.url,
      '--subdomain',
      'cli-ca',
      '--ca',
      certs.ca.file,
      '--json',
      '--no-inspect',
    ]);
    cleanups.push(() => trusting.kill('SIGKILL'));
    await trusting.waitFor('ready');
    expect((await get('cli-ca')).status).toBe(200);
  });
});
