import { type IncomingHttpHeaders, request } from 'node:http';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { askOfFields, errorBody, negotiateErrorFormat } from '../src/answers/error-page.js';
import { edgeAnswer } from '../src/answers/error-response.js';
import { buildEdge } from '../src/build-edge.js';
import { EdgeErrorCode } from '../src/errors.js';

const CHROME =
  'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7';
const FIREFOX = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

describe('negotiateErrorFormat', () => {
  it.each([
    [undefined, 'text'],
    ['', 'text'],
    ['*/*', 'text'], // curl, fetch()
    ['text/*', 'text'],
    ['text/plain', 'text'],
    [CHROME, 'html'],
    [FIREFOX, 'html'],
    ['text/html', 'html'],
    ['TEXT/HTML', 'html'],
    ['application/json', 'json'],
    ['application/json;charset=utf-8', 'json'],
    ['application/json, text/plain, */*', 'text'], // axios: text/plain named as high, the old answer stays
    ['application/json, text/plain;q=0.5', 'json'],
    ['text/html;q=0.5, text/plain', 'text'],
    ['text/html;q=0, */*', 'text'], // refused explicitly
    ['text/plain;q=0, text/html;q=0.1', 'html'],
    ['text/html;q=0.4, application/json;q=0.9', 'json'],
    ['application/json, text/html', 'json'], // same weight: the one listed first
    ['text/html, application/json', 'html'],
    ['text/html;q=bogus', 'text'], // an unreadable weight: the range is ignored
    ['text/html;level=1;q=1', 'html'],
    ['html', 'text'],
    ['*/html', 'text'],
    [',,;;,', 'text'],
  ] as const)('%s → %s', (accept, format) => {
    expect(negotiateErrorFormat(accept)).toBe(format);
  });

  it('reads a bounded number of ranges', () => {
    const many = `${'x/y, '.repeat(100)}text/html`;
    expect(negotiateErrorFormat(many)).toBe('text');
  });
});

describe('askOfFields', () => {
  it('joins every Accept field, and reads Host and the request id from a raw head', () => {
    const ask = askOfFields('GET', [
      'Accept',
      'text/plain;q=0.1',
      'HOST',
      'x.example.test',
      'accept',
      'text/html',
      'X-Request-Id',
      'r-1',
      'dangling',
    ]);
    expect(ask).toEqual({
      accept: 'text/plain;q=0.1, text/html',
      method: 'GET',
      host: 'x.example.test',
      requestId: 'r-1',
    });
    expect(negotiateErrorFormat(ask.accept)).toBe('html');
  });
});

describe('edgeAnswer', () => {
  const header = (answer: { headers: string[] }, name: string): string | undefined => {
    const i = answer.headers.findIndex((field, at) => at % 2 === 0 && field === name);
    return i < 0 ? undefined : answer.headers[i + 1];
  };

  it('without an ask is the plain text line it always was, with its headers', () => {
    const answer = edgeAnswer(EdgeErrorCode.TUNNEL_OFFLINE, 'tunnel x is offline', 5);
    expect(answer.status).toBe(502);
    expect(answer.body.toString()).toBe('tunnel x is offline\n');
    expect(answer.headers).toEqual([
      'content-type',
      'text/plain; charset=utf-8',
      'content-length',
      '20',
      'cache-control',
      'no-store',
      'x-content-type-options',
      'nosniff',
      'x-tunnel2-error',
      'TUNNEL2_ERR_TUNNEL_OFFLINE',
      'retry-after',
      '5',
    ]);
  });

  it('for curl keeps the body and adds only Vary and the CSP', () => {
    const answer = edgeAnswer(EdgeErrorCode.UNKNOWN_SESSION, 'no tunnel named "x"', undefined, undefined, {
      accept: '*/*',
      method: 'GET',
    });
    expect(answer.body.toString()).toBe('no tunnel named "x"\n');
    expect(header(answer, 'content-type')).toBe('text/plain; charset=utf-8');
    expect(header(answer, 'vary')).toBe('Accept');
    expect(header(answer, 'content-security-policy')).toContain("default-src 'none'");
  });

  it('for a browser is a page with the code, where, what to do and the request id', () => {
    const answer = edgeAnswer(
      EdgeErrorCode.RATE_LIMITED,
      'too many requests',
      7,
      { 'x-extra': '1' },
      { accept: FIREFOX, method: 'GET', host: 'demo.example.test', requestId: 'abc-1' },
    );
    expect(answer.status).toBe(429);
    const html = answer.body.toString();
    expect(header(answer, 'content-type')).toBe('text/html; charset=utf-8');
    expect(header(answer, 'content-length')).toBe(String(answer.body.length));
    expect(header(answer, 'retry-after')).toBe('7');
    expect(header(answer, 'x-extra')).toBe('1');
    expect(header(answer, 'x-tunnel2-error')).toBe('TUNNEL2_ERR_RATE_LIMITED');
    expect(header(answer, 'x-content-type-options')).toBe('nosniff');
    expect(header(answer, 'cache-control')).toBe('no-store');
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).toContain('<title>429 Too many requests</title>');
    expect(html).toContain('TUNNEL2_ERR_RATE_LIMITED');
    expect(html).toContain('the tunnel2 edge (demo.example.test)');
    expect(html).toContain('Retry in 7 seconds.');
    expect(html).toContain('abc-1');
    expect(html).toContain('prefers-color-scheme:dark');
    expect(html).not.toMatch(/<script|<link|<img|src=|href=|url\(|@import/i);
  });

  it('for JSON is one object under "error"', () => {
    const answer = edgeAnswer(EdgeErrorCode.TUNNEL_OFFLINE, 'tunnel x is offline', 5, undefined, {
      accept: 'application/json',
      method: 'GET',
      requestId: 'r1',
    });
    expect(header(answer, 'content-type')).toBe('application/json; charset=utf-8');
    const parsed = JSON.parse(answer.body.toString()) as { error: Record<string, unknown> };
    expect(parsed.error).toMatchObject({
      status: 502,
      code: 'TUNNEL2_ERR_TUNNEL_OFFLINE',
      message: 'tunnel x is offline',
      where: 'agent',
      requestId: 'r1',
    });
    expect(parsed.error.hint).toContain('tunnel2 http <port>');
    expect(parsed.error.hint).not.toContain('`');
  });

  it('for HEAD has the headers of the GET and no body', () => {
    const get = edgeAnswer(EdgeErrorCode.UNKNOWN_SESSION, 'no', undefined, undefined, {
      accept: 'text/html',
      method: 'GET',
    });
    const head = edgeAnswer(EdgeErrorCode.UNKNOWN_SESSION, 'no', undefined, undefined, {
      accept: 'text/html',
      method: 'HEAD',
    });
    expect(head.body.length).toBe(0);
    expect(head.headers).toEqual(get.headers);
  });

  it('escapes every value from the request or the message', () => {
    const hostile = `<script>alert(1)</script>"'&<img src=x onerror=alert(2)>`;
    const answer = edgeAnswer(
      EdgeErrorCode.UNKNOWN_SESSION,
      `no tunnel named ${hostile}`,
      undefined,
      undefined,
      { accept: 'text/html', method: 'GET', host: hostile, requestId: hostile },
    );
    const html = answer.body.toString();
    expect(html).not.toContain('<script');
    expect(html).not.toContain('<img');
    expect(html).toContain(
      '&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;&lt;img src=x onerror=alert(2)&gt;',
    );
  });
});

describe('errorBody', () => {
  it('cuts a long Host and request id on the page', () => {
    const answer = edgeAnswer(EdgeErrorCode.UNKNOWN_SESSION, 'no', undefined, undefined, {
      accept: 'text/html',
      method: 'GET',
      host: 'h'.repeat(5000),
      requestId: 'r'.repeat(5000),
    });
    const html = answer.body.toString();
    expect(html).toContain(`(${'h'.repeat(100)}…)`);
    expect(html).toContain(`${'r'.repeat(128)}…`);
    expect(html).not.toContain('h'.repeat(101));
  });

  it('names the local server for a backend error, with backquoted commands as code', () => {
    const { contentType, body } = errorBody(
      {
        status: 502,
        title: 'Local server unreachable',
        code: 'TUNNEL2_ERR_BACKEND_UNREACHABLE',
        message: 'tunnel2: backend refused connection on localhost:3000',
        where: 'backend',
        target: 'localhost:3000',
        hint: 'Start it, or restart `tunnel2 http <b>`.',
      },
      'html',
    );
    expect(contentType).toBe('text/html; charset=utf-8');
    const html = body.toString();
    expect(html).toContain('your local server at localhost:3000');
    expect(html).toContain('<code>tunnel2 http &lt;b&gt;</code>');
  });
});

describe("the edge's own host: Fastify's answers in the edge's form", () => {
  const cleanups: (() => unknown)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function edgeOnPort(): Promise<number> {
    const edge = buildEdge({ port: 0, logger: pino({ level: 'silent' }) });
    const { port } = await edge.listen();
    cleanups.push(() => edge.close(0));
    return port;
  }

  function send(port: number, method: string, path: string, headers: Record<string, string>, body?: string) {
    return new Promise<{ status: number; headers: IncomingHttpHeaders; body: string }>((resolve, reject) => {
      const req = request({ port, host: '127.0.0.1', method, path, headers }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  it('a URL Fastify cannot decode is a 400 edge answer: a page for a browser, the line for curl', async () => {
    const port = await edgeOnPort();
    const host = `localhost:${port}`;
    const page = await send(port, 'GET', '/%zz', { host, accept: FIREFOX });
    expect(page.status).toBe(400);
    expect(page.headers['x-tunnel2-error']).toBe(EdgeErrorCode.BAD_REQUEST);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.body).toContain('TUNNEL2_ERR_BAD_REQUEST');
    const line = await send(port, 'GET', '/%zz', { host, accept: '*/*' });
    expect(line.status).toBe(400);
    expect(line.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(line.body).toBe('malformed request: "/%zz" is not a valid URL\n');
  });

  it('a body sent to a URL that is no tunnel is not parsed: the 404 of every unknown URL, whatever it holds', async () => {
    const port = await edgeOnPort();
    const answer = await send(
      port,
      'POST',
      '/nothing',
      { host: `localhost:${port}`, accept: 'text/html', 'content-type': 'application/json' },
      '{bad json',
    );
    expect(answer.status).toBe(404);
    expect(answer.headers['x-tunnel2-error']).toBe(EdgeErrorCode.UNKNOWN_SESSION);
    expect(answer.headers['content-type']).toBe('text/html; charset=utf-8');
  });
});
