import { Agent, request } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Stack, startStack } from './support/stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ name: 'many' });
});
afterAll(() => stack.close());

it('500 concurrent requests over one session each get their own answer', async () => {
  const client = new Agent({ connections: 500 });
  try {
    const results = await Promise.all(
      Array.from({ length: 500 }, async (_, i) => {
        const res = await request(`http://127.0.0.1:${stack.port}/echo/request?id=${i}`, {
          method: i % 2 === 0 ? 'GET' : 'POST',
          headers: { host: stack.host, 'x-request-id': `req-${i}` },
          body: i % 2 === 0 ? undefined : `body-of-${i}`,
          dispatcher: client,
        });
        const echo = (await res.body.json()) as { url: string; rawHeaders: string[]; bodyLength: number };
        return { i, status: res.statusCode, echo };
      }),
    );
    for (const { i, status, echo } of results) {
      expect(status).toBe(200);
      expect(echo.url).toBe(`/echo/request?id=${i}`);
      const idIndex = echo.rawHeaders.findIndex((h) => h.toLowerCase() === 'x-request-id');
      expect(echo.rawHeaders[idIndex + 1]).toBe(`req-${i}`);
      expect(echo.bodyLength).toBe(i % 2 === 0 ? 0 : `body-of-${i}`.length);
    }
    expect(stack.tunnel.info?.name).toBe('many');
  } finally {
    await client.close();
  }
});
