import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { createServer, type Server, type Socket } from 'node:net';
import { promisify } from 'node:util';
import { Ajv } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCapture } from '../src/capture/capture.js';
import { EntryStore } from '../src/capture/entry-store.js';
import type { StoredEntry } from '../src/entries/stored-entry.js';
import { toCurl } from '../src/views/curl.js';
import { toHar } from '../src/views/har.js';

const require = createRequire(import.meta.url);
const run = promisify(execFile);

function entry(method: string, target: string, headers: string[], body: Buffer): StoredEntry {
  const store = new EntryStore();
  const r = createCapture(store, 1 << 20).begin({ method, target, headers })!;
  if (body.length > 0) r.requestData(body);
  r.responseHead(200, ['Content-Type', 'application/json', 'Set-Cookie', 'sid=1']);
  r.responseData(Buffer.from('{"ok":true}'));
  return store.get(r.finish()!)!;
}

describe('HAR export', () => {
  it('validates against the HAR 1.2 schema, text and binary bodies, and redacts', () => {
    const schemas = require('har-schema') as Record<string, { $id: string }>;
    const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true });
    ajv.addMetaSchema(require('ajv/dist/refs/json-schema-draft-06.json'));
    for (const schema of Object.values(schemas)) ajv.addSchema(schema);
    const validate = ajv.getSchema('har.json#')!;
    const har = toHar(
      [
        entry(
          'POST',
          '/hook?a=1&b=2',
          ['Host', 'x', 'Authorization', 'Bearer t', 'Cookie', 'c=1'],
          Buffer.from('{}'),
        ),
        entry('PUT', '/bin', ['Host', 'x'], Buffer.from([0, 255, 1, 2])),
        entry('GET', '/', [], Buffer.alloc(0)),
      ],
      { baseUrl: 'https://app.example.com', version: '0.1.0', redact: true },
    );
    expect(validate(har), JSON.stringify(validate.errors)).toBe(true);
    const text = JSON.stringify(har);
    expect(text).not.toContain('Bearer t');
    expect(text).not.toContain('sid=1');
    expect(text).not.toContain('c=1');
    expect(text).toContain('https://app.example.com/hook?a=1&b=2');
  });
});

interface Raw {
  head: string;
  body: Buffer;
}

/** A server that records the raw bytes of one request (head and Content-Length body) and answers 204. */
function rawServer(received: Raw[]): Promise<Server> {
  const server = createServer((socket: Socket) => {
    let data = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      const end = data.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = data.subarray(0, end).toString('latin1');
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (data.length < end + 4 + length) return;
      received.push({ head, body: data.subarray(end + 4, end + 4 + length) });
      socket.end('HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n');
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

describe('copy as curl (run with real curl against a server that records the raw request)', () => {
  const received: Raw[] = [];
  let server: Server;
  let base: string;
  beforeAll(async () => {
    // Not a bare "curl: command not found" (exit 127) in every case below.
    const curl = await run('bash', ['-c', 'command -v curl']).catch(() => undefined);
    if (curl === undefined)
      throw new Error('curl is not installed: apt-get install -y curl (.ci/run does it)');
    server = await rawServer(received);
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const cases: { name: string; method: string; target: string; headers: string[]; body: Buffer }[] = [
    {
      name: 'text body with quotes, newlines and a leading @',
      method: 'POST',
      target: '/hooks/../a%20b?x=[1]&y={2}',
      headers: [
        'Content-Type',
        'application/json',
        'X-Sig',
        'it\'s "quoted" $HOME `x`',
        'X-Rep',
        '1',
        'X-Rep',
        '2',
        'User-Agent',
        'Stripe/1.0',
        'Content-Length',
        '',
      ],
      body: Buffer.from('@not-a-file\r\nline 2\n\'single\' "double" $(whoami)\t€'),
    },
    {
      name: 'binary body with NUL bytes',
      method: 'PATCH',
      target: '/bin',
      headers: ['Content-Type', 'application/octet-stream', 'Content-Length', ''],
      body: Buffer.from([0, 1, 2, 255, 254, 0, 10, 13, 39]),
    },
    {
      name: 'no body, an empty header value',
      method: 'DELETE',
      target: '/item/7',
      headers: ['X-Empty', '', 'Accept', 'text/plain'],
      body: Buffer.alloc(0),
    },
  ];

  for (const c of cases) {
    it(c.name, async () => {
      const headers = ['Host', 'ignored.example', ...c.headers];
      const cl = headers.indexOf('Content-Length');
      if (cl >= 0) headers[cl + 1] = String(c.body.length);
      const captured = entry(c.method, c.target, headers, c.body);
      const command = toCurl(captured, { baseUrl: base });
      received.length = 0;
      await run('bash', ['-c', `${command.trim()} -sS -o /dev/null`]);
      expect(received).toHaveLength(1);
      const [requestLine, ...lines] = received[0]!.head.split('\r\n');
      expect(requestLine).toBe(`${c.method} ${c.target} HTTP/1.1`);
      const sent = lines.map((line) => {
        const colon = line.indexOf(':');
        return [line.slice(0, colon), line.slice(colon + 1).trim()];
      });
      // Host first (curl's place for it), then every header in its order with its repeats, nothing added.
      expect(sent[0]).toEqual(['Host', new URL(base).host]);
      expect(sent.slice(1).flat()).toEqual(
        c.headers.map((h, i) =>
          c.headers[i - 1] === 'Content-Length' && i % 2 === 1 ? String(c.body.length) : h,
        ),
      );
      expect(received[0]!.body.equals(c.body)).toBe(true);
    });
  }
});

describe('copy as curl: hop-by-hop fields', () => {
  it('leaves out the fields Connection names and Transfer-Encoding, as the agent does', () => {
    const captured = entry(
      'POST',
      '/',
      [
        'Host',
        'x',
        'Connection',
        'keep-alive, X-Hop',
        'X-Hop',
        'secret',
        'Transfer-Encoding',
        'chunked',
        'X-Kept',
        '1',
      ],
      Buffer.from('a'),
    );
    const command = toCurl(captured, { baseUrl: 'http://127.0.0.1:1' });
    expect(command).toContain("'X-Kept: 1'");
    expect(command).not.toMatch(/X-Hop|Connection|Transfer-Encoding/i);
  });
});
