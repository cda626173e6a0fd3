import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { headerValues, send } from './support/http-client.js';
import { type Stack, startStack } from './support/stack.js';

interface Echo {
  method: string;
  url: string;
  rawHeaders: string[];
  bodyLength: number;
  bodySha256: string;
}

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ name: 'routing' });
});
afterAll(() => stack.close());

const methods = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/** The two public URL forms of one backend path. */
function routes(path: string): { via: string; path: string; host: string }[] {
  return [
    { via: 'host', path, host: stack.host },
    { via: 'path', path: `/session/${stack.name}${path}`, host: `localhost:${stack.port}` },
  ];
}

describe('routing by host and by path', () => {
  for (const method of methods) {
    it(`${method} reaches the backend with its path and query, both URL forms`, async () => {
      for (const route of routes('/echo/request?a=1&b=x%20y&b=2')) {
        const res = await send({ port: stack.port, path: route.path, method, headers: ['Host', route.host] });
        expect(res.status, route.via).toBe(200);
        if (method === 'HEAD') {
          expect(res.length).toBe(0);
          continue;
        }
        const echo = JSON.parse(res.body.toString()) as Echo;
        expect(echo.method).toBe(method);
        expect(echo.url).toBe('/echo/request?a=1&b=x%20y&b=2');
      }
    });
  }

  it('keeps percent-encoded paths byte for byte', async () => {
    const path = '/echo/request/%E2%9C%93/a%2Fb/%25?q=%26%3D';
    for (const route of routes(path)) {
      const res = await send({ port: stack.port, path: route.path, headers: ['Host', route.host] });
      expect(res.status).toBe(200);
      expect((JSON.parse(res.body.toString()) as Echo).url).toBe(path);
    }
  });

  it('the path form with no trailing path reaches /', async () => {
    const res = await send({
      port: stack.port,
      path: `/session/${stack.name}?x=1`,
      headers: ['Host', `localhost:${stack.port}`],
    });
    // The backend answers 404 JSON naming the path it saw.
    expect(res.body.toString()).toContain('/?x=1');
  });

  it('carries multi-valued request headers in order, and name case does not matter', async () => {
    for (const route of routes('/echo/request')) {
      const res = await send({
        port: stack.port,
        path: route.path,
        headers: [
          'Host',
          route.host,
          'X-Multi',
          'one',
          'x-multi',
          'two',
          'X-MULTI',
          'three',
          'Accept',
          'text/plain',
        ],
      });
      const echo = JSON.parse(res.body.toString()) as Echo;
      expect(headerValues(echo.rawHeaders, 'x-multi')).toEqual(['one', 'two', 'three']);
      expect(headerValues(echo.rawHeaders, 'accept')).toEqual(['text/plain']);
    }
  });

  it('sets X-Forwarded-For/-Proto/-Host and drops hop-by-hop headers', async () => {
    const res = await send({
      port: stack.port,
      path: '/echo/request',
      headers: [
        'Host',
        stack.host,
        'Connection',
        'keep-alive, X-Secret-Hop',
        'X-Secret-Hop',
        'no',
        'Keep-Alive',
        'timeout=5',
      ],
    });
    const echo = JSON.parse(res.body.toString()) as Echo;
    expect(headerValues(echo.rawHeaders, 'x-forwarded-for')).toEqual(['127.0.0.1']);
    expect(headerValues(echo.rawHeaders, 'x-forwarded-proto')).toEqual(['http']);
    expect(headerValues(echo.rawHeaders, 'x-forwarded-host')).toEqual([stack.host]);
    expect(headerValues(echo.rawHeaders, 'x-secret-hop')).toEqual([]);
    expect(headerValues(echo.rawHeaders, 'keep-alive')).toEqual([]);
  });

  it('rewrites Host to the target by default', async () => {
    const res = await send({ port: stack.port, path: '/echo/request', headers: ['Host', stack.host] });
    const echo = JSON.parse(res.body.toString()) as Echo;
    expect(headerValues(echo.rawHeaders, 'host')).toEqual([`localhost:${stack.backend.port}`]);
  });

  it('keeps multiple Set-Cookie response headers separate', async () => {
    for (const route of routes('/headers/multi')) {
      const res = await send({ port: stack.port, path: route.path, headers: ['Host', route.host] });
      expect(res.status).toBe(200);
      expect(headerValues(res.rawHeaders, 'set-cookie').length).toBe(2);
      expect(headerValues(res.rawHeaders, 'x-multi')).toEqual(['a', 'b']);
    }
  });
});

describe('--host-header', () => {
  for (const [mode, expected] of [
    ['preserve', (s: Stack) => s.host],
    ['backend.test:8443', () => 'backend.test:8443'],
  ] as const) {
    it(`${mode}: the backend sees the expected Host`, async () => {
      const other = await startStack({
        name: `host-${mode === 'preserve' ? 'preserve' : 'value'}`,
        tunnel: { hostHeader: mode },
      });
      try {
        const res = await send({ port: other.port, path: '/echo/request', headers: ['Host', other.host] });
        const echo = JSON.parse(res.body.toString()) as Echo;
        expect(headerValues(echo.rawHeaders, 'host')).toEqual([expected(other)]);
      } finally {
        await other.close();
      }
    });
  }
});
