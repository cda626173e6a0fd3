import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { NO_ROUTE_SCHEMAS, RouteSchemaError } from '../src/no-route-schemas.js';

const run = promisify(execFile);
const edgeDist = new URL('../dist/index.js', import.meta.url).href;

describe('NO_ROUTE_SCHEMAS', () => {
  it('serves routes without a schema', async () => {
    const app = Fastify({ schemaController: NO_ROUTE_SCHEMAS });
    app.get('/plain', async () => ({ ok: true }));
    app.post('/echo', async (request) => request.body);
    try {
      expect((await app.inject({ url: '/plain' })).json()).toEqual({ ok: true });
      const echoed = await app.inject({ method: 'POST', url: '/echo', payload: { a: 1 } });
      expect(echoed.json()).toEqual({ a: 1 });
    } finally {
      await app.close();
    }
  });

  for (const [what, schema] of [
    ['validation', { body: { type: 'object' } }],
    ['response serialization', { response: { 200: { type: 'object' } } }],
  ] as const) {
    it(`refuses a route with a schema for ${what}, naming why`, async () => {
      const app = Fastify({ schemaController: NO_ROUTE_SCHEMAS });
      app.post('/typed', { schema }, async () => ({}));
      const failure = await app.ready().then(
        () => undefined,
        (err: unknown) => err,
      );
      await app.close().catch(() => {});
      expect(failure).toBeInstanceOf(RouteSchemaError);
      expect((failure as RouteSchemaError).code).toBe('TUNNEL2_ERR_ROUTE_SCHEMA_UNSUPPORTED');
      expect((failure as RouteSchemaError).message).toContain(`compiles no route schemas (${what})`);
    });
  }

  it("keeps ajv and fast-json-stringify's compiler out of a serving edge", async () => {
    // A fresh process: the test runner's own module cache may hold them for other reasons.
    const probe = [
      "import { createRequire } from 'node:module';",
      `const { buildEdge } = await import(${JSON.stringify(edgeDist)});`,
      "const edge = buildEdge({ port: 0, host: '127.0.0.1' });",
      'const { port } = await edge.listen();',
      "const answer = await fetch('http://127.0.0.1:' + port + '/session/nobody/', { headers: { connection: 'close' } });",
      'const loaded = Object.keys(createRequire(import.meta.url).cache).filter((file) => /[\\\\/](ajv|@fastify[\\\\/]ajv-compiler|@fastify[\\\\/]fast-json-stringify-compiler)[\\\\/]/.test(file));',
      'await edge.close(0);',
      'process.stdout.write(JSON.stringify({ status: answer.status, loaded }));',
    ].join('\n');
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', probe], {
      env: { ...process.env, TUNNEL2_LOG_LEVEL: 'silent' },
    });
    const result = JSON.parse(stdout) as { status: number; loaded: string[] };
    expect(result.status).toBe(404);
    expect(result.loaded).toEqual([]);
  });
});
