import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, readdir, readlink, rm, writeFile } from 'node:fs/promises';
import { request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createHttpsRedirect, type HttpsRedirectOptions } from '../src/listeners/https-redirect.js';

// The plain port beside a TLS one (`httpPort`): its 308s and its ACME answers, over real sockets.

let dir: string;
let acme: string;
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tunnel2-redirect-'));
  acme = join(dir, 'acme');
  await mkdir(acme);
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function redirectPort(options: Partial<HttpsRedirectOptions> = {}): Promise<number> {
  const server: Server = createHttpsRedirect({
    httpsPort: () => 8443,
    domain: 'tunnel.test',
    acmeDir: acme,
    headersTimeoutMs: 5_000,
    maxHeaderBytes: 16_384,
    logger: pino({ level: 'silent' }),
    ...options,
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(() => {
    server.closeAllConnections();
    server.close();
  });
  return (server.address() as AddressInfo).port;
}

function get(
  port: number,
  path: string,
  method = 'GET',
  host = 'demo.tunnel.test',
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method, agent: false, headers: { host } });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString(),
        }),
      );
    });
    req.end();
  });
}

/** This process's open descriptors that are the file at `path`. */
async function descriptorsOf(path: string): Promise<number> {
  let count = 0;
  for (const fd of await readdir('/proc/self/fd')) {
    const target = await readlink(`/proc/self/fd/${fd}`).catch(() => '');
    if (target === path) count++;
  }
  return count;
}

describe('the ACME answers of httpPort', () => {
  it('closes the challenge file once answered, for GET and HEAD (no descriptor left to the garbage collector)', async () => {
    const token = 'tok-closed_1';
    const file = join(acme, token);
    await writeFile(file, `${token}.thumbprint`);
    const port = await redirectPort();
    for (let i = 0; i < 5; i++) {
      const answer = await get(port, `/.well-known/acme-challenge/${token}`);
      expect(answer.status).toBe(200);
      expect(answer.body).toBe(`${token}.thumbprint`);
      const head = await get(port, `/.well-known/acme-challenge/${token}`, 'HEAD');
      expect(head.status).toBe(200);
      expect(head.headers['content-length']).toBe(String(`${token}.thumbprint`.length));
    }
    expect(await descriptorsOf(file)).toBe(0);
  });

  it("finds the answer where certbot's, lego's and acme.sh's webroot mode write it: <acmeDir>/.well-known/acme-challenge/", async () => {
    const challenges = join(acme, '.well-known', 'acme-challenge');
    await mkdir(challenges, { recursive: true });
    await writeFile(join(challenges, 'tok-webroot'), 'tok-webroot.thumbprint');
    // A flat folder (dehydrated's WELLKNOWN, a folder given to the ACME client as the challenge folder).
    await writeFile(join(acme, 'tok-flat'), 'tok-flat.thumbprint');
    const port = await redirectPort();
    const webroot = await get(port, '/.well-known/acme-challenge/tok-webroot');
    expect(webroot.status).toBe(200);
    expect(webroot.body).toBe('tok-webroot.thumbprint');
    const flat = await get(port, '/.well-known/acme-challenge/tok-flat');
    expect(flat.status).toBe(200);
    expect(flat.body).toBe('tok-flat.thumbprint');
    expect((await get(port, '/.well-known/acme-challenge/tok-none')).status).toBe(404);
  });

  it('answers 404 for a FIFO in the folder at once, without a reader blocked on it', async () => {
    await promisify(execFile)('mkfifo', [join(acme, 'tok-fifo')]);
    const port = await redirectPort();
    const answer = await get(port, '/.well-known/acme-challenge/tok-fifo');
    expect(answer.status).toBe(404);
  });
});
