// HTTP/2 and gRPC through the tunnel with tools nobody here wrote: grpcurl (reflection and a call), curl
// (--http2 over TLS, --http2-prior-knowledge over h2c), h2load (a short bounded load, 0 failures), Chromium
// (a page over the TLS edge negotiates h2) and a WebSocket (HTTP/1.1 upgrade) on the same TLS port.

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import { createTestBackend, type TestBackend } from '@tunnel2/test-backend';
import { findCommand } from '@tunnel2/test-services';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  type EdgeCertificates,
  GRPC_TUNNEL,
  type GrpcStack,
  makeEdgeCertificates,
  startAgent,
  startGrpcStack,
  stop,
  type Transport,
} from './support/grpc-stack.js';
import { findGrpcurl } from './support/grpcurl.js';
import type { Spawned } from './support/processes.js';
import { startWsBackend, type WsBackend } from './support/ws-backend.js';

const run = promisify(execFile);
const CHROMIUM = '/usr/bin/chromium';
/** The HTTP/1.1 test backend's tunnel. */
const WEB = 'web';

let tls: EdgeCertificates;
let backend: TestBackend;
beforeAll(async () => {
  tls = await makeEdgeCertificates([GRPC_TUNNEL]);
  backend = await createTestBackend();
});
afterAll(async () => {
  await backend?.close();
  await tls?.dispose();
});

describe.each<Transport>(['h2c', 'tls'])('tools through the tunnel over %s', (transport) => {
  let stack: GrpcStack;
  let web: Spawned;
  beforeAll(async () => {
    stack = await startGrpcStack(transport, tls);
    web = await startAgent(backend.port, stack.url, WEB, {
      h2c: false,
      ...(transport === 'tls' ? { ca: tls.ca.file } : {}),
    });
  });
  afterAll(async () => {
    if (web !== undefined) await stop(web);
    await stack?.close();
  });

  /** grpcurl's arguments that reach the gRPC tunnel over this transport. */
  const grpcurlTarget = (): string[] => [
    // Over TLS grpcurl checks the certificate against -authority's host, which the edge's certificate names.
    ...(transport === 'tls' ? ['-cacert', tls.ca.file] : ['-plaintext']),
    '-authority',
    stack.authority(GRPC_TUNNEL),
    `127.0.0.1:${stack.port}`,
  ];

  it('grpcurl lists the services by reflection and calls Echo', async () => {
    const grpcurl = findGrpcurl();
    const listed = await run(grpcurl, [...grpcurlTarget(), 'list'], { timeout: 30_000 });
    expect(listed.stdout.split('\n')).toContain('tunnel2.test.v1.TestService');
    const described = await run(grpcurl, [...grpcurlTarget(), 'describe', 'tunnel2.test.v1.TestService'], {
      timeout: 30_000,
    });
    expect(described.stdout).toContain('rpc Chat ( stream .tunnel2.test.v1.ChatMessage )');
    const args = [
      '-d',
      '{"message":"hello from grpcurl"}',
      ...grpcurlTarget(),
      'tunnel2.test.v1.TestService/Echo',
    ];
    const called = await run(grpcurl, args, { timeout: 30_000 });
    expect(JSON.parse(called.stdout)).toEqual({ message: 'hello from grpcurl' });
  });

  it(`curl ${transport === 'tls' ? '--http2 over TLS' : '--http2-prior-knowledge over h2c'} speaks HTTP/2 to the edge`, async () => {
    const curl = findCommand('curl', 'curl');
    const args =
      transport === 'tls'
        ? ['--http2', '--cacert', tls.ca.file, `https://localhost:${stack.port}/loadtest/ping`]
        : ['--http2-prior-knowledge', `http://127.0.0.1:${stack.port}/loadtest/ping`];
    // curl sends a Host header given to it as HTTP/2's :authority.
    const { stdout } = await run(
      curl,
      ['-sS', '-H', `Host: ${WEB}.localhost:${stack.port}`, '-w', '\n%{http_code} %{http_version}', ...args],
      { timeout: 30_000 },
    );
    expect(stdout).toBe('pong\n200 2');
  });

  it('h2load: 2,000 requests on 4 connections x 10 streams, none failed or errored', async () => {
    const h2load = findCommand('h2load', 'nghttp2-client');
    const scheme = transport === 'tls' ? 'https' : 'http';
    const { stdout } = await run(
      h2load,
      [
        '-n',
        '2000',
        '-c',
        '4',
        '-m',
        '10',
        '-H',
        `:authority: ${WEB}.localhost:${stack.port}`,
        `${scheme}://127.0.0.1:${stack.port}/loadtest/ping`,
      ],
      { timeout: 60_000 },
    );
    console.log(`h2load over ${transport}: ${/finished in .*/.exec(stdout)?.[0]}`);
    expect(stdout).toMatch(
      /requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, 0 errored/,
    );
    expect(stdout).toMatch(/status codes: 2000 2xx, 0 3xx, 0 4xx, 0 5xx/);
    if (transport === 'tls') expect(stdout).toMatch(/Application protocol: h2/);
  }, 90_000);
});

describe('the TLS port serves browsers over h2 and WebSockets over HTTP/1.1', () => {
  let stack: GrpcStack;
  let agents: Spawned[] = [];
  let ws: WsBackend;
  beforeAll(async () => {
    stack = await startGrpcStack('tls', tls);
    ws = await startWsBackend();
    agents = [
      await startAgent(backend.port, stack.url, WEB, { h2c: false, ca: tls.ca.file }),
      await startAgent(ws.port, stack.url, 'ws', { h2c: false, ca: tls.ca.file }),
    ];
  });
  afterAll(async () => {
    for (const agent of agents) await stop(agent);
    await ws?.close();
    await stack?.close();
  });

  it('Chromium loads a page through the TLS edge and its navigation used h2', async () => {
    // No silent skip: .ci/run installs Debian's chromium, and this test must run there.
    expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium`).toBe(true);
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      // The test CA is not in Chromium's store: the certificate is what the curl and gRPC tests check.
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--ignore-certificate-errors',
      ],
    });
    try {
      const page = await browser.newPage();
      // Chromium resolves every *.localhost name to loopback, so the host-routed URL works as is.
      const response = await page.goto(`https://${WEB}.localhost:${stack.port}/loadtest/info`);
      expect(response?.status()).toBe(200);
      // A string: the expression runs in the page, whose DOM types this Node project does not compile against.
      const protocol = await page.evaluate("performance.getEntriesByType('navigation')[0].nextHopProtocol");
      expect(protocol).toBe('h2');
    } finally {
      await browser.close();
    }
  }, 60_000);

  it('a WebSocket works through the same TLS port (an HTTP/1.1 upgrade: ws offers no ALPN)', async () => {
    const socket = new WebSocket(`wss://localhost:${stack.port}/echo`, {
      ca: tls.ca.cert,
      headers: { host: `ws.localhost:${stack.port}` },
    });
    try {
      await new Promise((resolve, reject) => {
        socket.once('open', resolve);
        socket.once('error', reject);
      });
      const echoed = new Promise<string>((resolve) =>
        socket.once('message', (data) => resolve(String(data))),
      );
      socket.send('hello over wss');
      expect(await echoed).toBe('hello over wss');
    } finally {
      socket.terminate();
    }
  });
});
