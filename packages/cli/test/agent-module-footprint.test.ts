import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const cliEntry = new URL('../dist/index.js', import.meta.url).href;

// Records every file the CLI's library entry loads (ESM and CommonJS alike), in a fresh process.
const script = `
import { registerHooks } from 'node:module';
const files = [];
registerHooks({ load(url, context, next) { files.push(url); return next(url, context); } });
await import(${JSON.stringify(cliEntry)});
process.stdout.write(JSON.stringify(files));
`;

describe('what the agent loads', () => {
  // undici's index loads every part of undici (fetch, WebSocket, cache, mock agents, ...): about 1.2 MB of
  // source, 5 MB of heap and 13 MB of RSS an agent that only needs a Pool paid for (bench/README.md,
  // optimization log).
  it("loads undici's Pool and not undici's index", async () => {
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script]);
    const undiciFiles = (JSON.parse(stdout) as string[]).filter((url) =>
      url.includes('/node_modules/undici/'),
    );
    expect(undiciFiles.some((url) => url.endsWith('/undici/lib/dispatcher/pool.js'))).toBe(true);
    expect(undiciFiles.filter((url) => url.endsWith('/undici/index.js'))).toEqual([]);
    expect(undiciFiles.filter((url) => /\/undici\/lib\/(web|mock|cache)\//.test(url))).toEqual([]);
  });
});
