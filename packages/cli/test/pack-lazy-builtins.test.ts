import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUNDLE_OPTIONS, builtinsAsRequire, cliDir, lazyBuiltins } from '../../../scripts/pack-cli.js';

const run = promisify(execFile);

// The published agent must not load node:tls, node:https or node:zlib at start (idle RSS, issue #19): ws
// requires them when it loads, and the pack turns those requires into on-first-use proxies (as it does
// undici's node:http2, issue #34: src/lazy-builtins.ts).
describe('pack-cli: ws without its eager built-ins', () => {
  let dir: string;
  let bundle: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tunnel2-lazy-ws-'));
    bundle = join(dir, 'ws-bundle.mjs');
    await build({
      ...BUNDLE_OPTIONS,
      absWorkingDir: cliDir,
      stdin: {
        contents: "export { WebSocket, WebSocketServer } from 'ws';",
        resolveDir: cliDir,
        loader: 'js',
      },
      outfile: bundle,
      plugins: [builtinsAsRequire, lazyBuiltins],
    });
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** The built-ins among node:tls, node:https, node:zlib that `script` (run after importing the bundle) loaded. */
  async function loadedAfter(script: string): Promise<string[]> {
    const code =
      `const { WebSocket, WebSocketServer } = await import(${JSON.stringify(bundle)});\n${script}\n` +
      'console.log(JSON.stringify(process.moduleLoadList.filter((m) => /^NativeModule (tls|https|zlib)$/.test(m))));';
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', code]);
    return JSON.parse(stdout.trim().split('\n').pop() ?? '[]') as string[];
  }

  it('loads none of them with ws, nor for a ws:// connection', async () => {
    const loaded = await loadedAfter(
      [
        "const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });",
        "await new Promise((resolve) => server.once('listening', resolve));",
        "const ws = new WebSocket('ws://127.0.0.1:' + server.address().port, { perMessageDeflate: false });",
        "await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });",
        'ws.close(); server.close();',
      ].join('\n'),
    );
    expect(loaded).toEqual([]);
  });

  it('loads node:tls and node:https through the proxies for a wss:// connection', async () => {
    // Nothing listens on port 1: the connection fails, after ws has called https.request and tls.connect.
    const loaded = await loadedAfter(
      [
        "const ws = new WebSocket('wss://127.0.0.1:1');",
        "const event = await new Promise((resolve) => ws.once('error', (err) => resolve(err.code)));",
        "if (event !== 'ECONNREFUSED') throw new Error('unexpected ' + event);",
      ].join('\n'),
    );
    expect(loaded).toEqual(expect.arrayContaining(['NativeModule tls', 'NativeModule https']));
  });
});

describe('lazy-builtins: the rewrites of the dependencies', () => {
  it('give undici the node:http2 constants it reads when it loads, as node:http2 has them', async () => {
    const { UNDICI_H2_CONSTANTS } = await import('../src/lazy-builtins.js');
    const { constants } = process.getBuiltinModule('node:http2');
    for (const [name, value] of Object.entries(UNDICI_H2_CONSTANTS)) {
      expect([name, (constants as Record<string, unknown>)[name]]).toEqual([name, value]);
    }
  });

  it('fail on a dependency file without the line they expect', async () => {
    const { rewriteLazyBuiltins } = await import('../src/lazy-builtins.js');
    const path = '/x/node_modules/ws/lib/websocket.js';
    expect(() => rewriteLazyBuiltins(path, "const https = require('node:https');")).toThrow(/expected/);
    expect(rewriteLazyBuiltins('/x/src/websocket.js', 'unchanged')).toBe('unchanged');
    // The failure-only assert is only right where assert is called and no member of it is read.
    const undiciFile = '/x/node_modules/undici/lib/core/util.js';
    const assertLine = "const assert = require('node:assert')\n";
    expect(() => rewriteLazyBuiltins(undiciFile, `${assertLine}assert.strictEqual(1, 1)`)).toThrow(/member/);
    const rewritten = rewriteLazyBuiltins(undiciFile, `${assertLine}module.exports = assert`);
    const assert = new Function('module', `${rewritten}; return module.exports`)({}) as (v: unknown) => void;
    expect(() => assert(true)).not.toThrow();
    expect(() => assert(false)).toThrow(expect.objectContaining({ code: 'ERR_ASSERTION' }));
  });

  it("load undici's Pool and make an HTTP/1.1 request without node:http2 or node:tls", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tunnel2-lazy-undici-'));
    try {
      const out = join(dir, 'undici-bundle.mjs');
      await build({
        ...BUNDLE_OPTIONS,
        absWorkingDir: cliDir,
        stdin: { contents: "export { Pool } from 'undici';", resolveDir: cliDir, loader: 'js' },
        outfile: out,
        plugins: [builtinsAsRequire, lazyBuiltins],
      });
      // Nothing listens on port 1: the request fails after undici dialled with node:net.
      const code =
        `const { Pool } = await import(${JSON.stringify(out)});\n` +
        "const pool = new Pool('http://127.0.0.1:1');\n" +
        "const failed = await pool.request({ path: '/', method: 'GET' }).then(() => 'answered', (err) => err.code);\n" +
        'await pool.close();\n' +
        'console.log(JSON.stringify([failed, process.moduleLoadList.filter((m) => /^NativeModule (http2|tls)$/.test(m))]));';
      const { stdout } = await run(process.execPath, ['--input-type=module', '-e', code]);
      expect(JSON.parse(stdout.trim().split('\n').pop() ?? '[]')).toEqual(['ECONNREFUSED', []]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
