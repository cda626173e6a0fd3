import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { Entry, RawExchange } from '@tunnel2/inspector';
import { afterEach, describe, expect, it } from 'vitest';
import { send } from './support/http-client.js';
import { type InspectedStack, startInspectedStack } from './support/inspected-stack.js';

/** A backend that answers with its own reason phrase and header case, and tells the Host it received. */
function reasonBackend(): Promise<Server> {
  const server = createServer((req: IncomingMessage, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(201, 'Made It', [
        'X-Backend-Saw-Host',
        req.headers.host ?? '',
        'Content-Type',
        'text/plain',
      ]);
      res.end('made');
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

const stacks: InspectedStack[] = [];
afterEach(async () => {
  for (const stack of stacks.splice(0)) await stack.close();
});

async function stackWith(name: string, hostHeader?: string): Promise<InspectedStack> {
  const stack = await startInspectedStack(
    await reasonBackend(),
    name,
    hostHeader === undefined ? {} : { hostHeader },
  );
  stacks.push(stack);
  return stack;
}

async function lastEntry(stack: InspectedStack): Promise<{ entry: Entry; raw: RawExchange }> {
  const list = (await (await fetch(`${stack.inspectorUrl}/api/entries?limit=1`)).json()) as {
    entries: { id: string }[];
  };
  const id = list.entries[0]!.id;
  const entry = (await (await fetch(`${stack.inspectorUrl}/api/entries/${id}`)).json()) as Entry;
  const raw = (await (await fetch(`${stack.inspectorUrl}/api/entries/${id}/raw`)).json()) as RawExchange;
  return { entry, raw };
}

describe('the raw view: each message as HTTP/1.1 text, as it crossed the wire (real edge, agent, backend)', () => {
  it('shows the request in the order and case the client sent, and the response with its reason phrase', async () => {
    const stack = await stackWith('raw');
    const res = await send({
      port: stack.port,
      path: '/hook?x=1',
      method: 'POST',
      headers: [
        'hOsT',
        `raw.localhost:${stack.port}`,
        'X-Zeta',
        '1',
        'content-TYPE',
        'text/plain',
        'X-Alpha',
        '2',
      ],
      body: Buffer.from('hello wire'),
    });
    expect(res.status).toBe(201);
    const { raw, entry } = await lastEntry(stack);
    expect(entry.responseStatusText).toBe('Made It');
    const lines = raw.request.head.split('\r\n');
    expect(lines[0]).toBe('POST /hook?x=1 HTTP/1.1');
    // In the order and case the client wrote them (Content-Length, set by node's client, among them).
    const names = lines.slice(1).map((l) => l.slice(0, l.indexOf(':')));
    expect(names.filter((n) => ['hOsT', 'X-Zeta', 'content-TYPE', 'X-Alpha'].includes(n))).toEqual([
      'hOsT',
      'X-Zeta',
      'content-TYPE',
      'X-Alpha',
    ]);
    expect(lines).toContain(`hOsT: raw.localhost:${stack.port}`);
    expect(raw.request.head.endsWith('\r\n\r\n')).toBe(true);
    expect(raw.request.body).toBe('hello wire');
    expect(raw.request.bodyNote).toBeNull();
    expect(raw.request.hop).toMatch(/^public client → edge/);
    expect(raw.response!.hop).toMatch(/^your backend → agent/);
    const response = raw.response!.head.split('\r\n');
    expect(response[0]).toBe('HTTP/1.1 201 Made It');
    expect(response).toContain(`X-Backend-Saw-Host: ${stack.tunnel.target.host}`);
    expect(raw.response!.body).toBe('made');
  });

  it('says when a body is binary or was cut at the body limit, instead of showing it', async () => {
    const small = await startInspectedStack(await reasonBackend(), 'raw-cut', {
      inspect: { port: 0, bodyLimit: 8 },
    });
    stacks.push(small);
    await send({
      port: small.port,
      path: '/bin',
      method: 'PUT',
      headers: ['Host', `raw-cut.localhost:${small.port}`],
      body: Buffer.from([0, 1, 2, 3, 0xff, 0xfe, 7, 8, 9, 10, 11, 12]),
    });
    const { raw } = await lastEntry(small);
    expect(raw.request.body).toBeNull();
    expect(raw.request.bodyNote).toContain('binary');
    expect(raw.request.bodyNote).toContain('captured 8 of 12 bytes');
  });
});

describe('the Host of each hop (GET /api/entries/:id hosts)', () => {
  const modes: [string, string | undefined, (port: number, backend: string) => string][] = [
    ['rewrite (the default)', undefined, (_port, backend) => backend],
    ['preserve', 'preserve', (port) => `hosts-preserve.localhost:${port}`],
    ['a value', 'api.internal', () => 'api.internal'],
  ];
  for (const [label, mode, expected] of modes) {
    it(`--host-header ${label}: the public client's and the backend's Host, as each received it`, async () => {
      const name = `hosts-${mode === undefined ? 'rewrite' : mode === 'preserve' ? 'preserve' : 'value'}`;
      const stack = await stackWith(name, mode);
      const res = await send({
        port: stack.port,
        path: '/',
        headers: ['Host', `${name}.localhost:${stack.port}`],
      });
      const { entry } = await lastEntry(stack);
      expect(entry.hosts).toEqual({
        public: `${name}.localhost:${stack.port}`,
        backend: expected(stack.port, stack.tunnel.target.host),
      });
      // What the backend says it received is what the inspector says it was sent.
      expect(res.headers['x-backend-saw-host']).toBe(entry.hosts!.backend);
    });
  }
});
