import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { agentKeyDir, loadAgentKey } from '../src/config/agent-key.js';
import { agentKeyFor } from '../src/session/agent-session.js';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function home(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tunnel2-agent-key-'));
  dirs.push(dir);
  return dir;
}

describe('the agent key file', () => {
  it('is created on first use (dir 0700, file 0600) and read back the same on every later run', () => {
    const xdg = home();
    const warnings: string[] = [];
    const first = loadAgentKey({ env: { XDG_CONFIG_HOME: xdg }, warn: (l) => warnings.push(l) });
    expect(first.path).toBe(join(xdg, 'tunnel2', 'agent-key'));
    expect(first.key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(statSync(join(xdg, 'tunnel2')).mode & 0o777).toBe(0o700);
    expect(statSync(first.path!).mode & 0o777).toBe(0o600);
    expect(readFileSync(first.path!, 'utf8')).toBe(`${first.key}\n`);
    expect(loadAgentKey({ env: { XDG_CONFIG_HOME: xdg }, warn: (l) => warnings.push(l) }).key).toBe(
      first.key,
    );
    expect(warnings).toEqual([]);
  });

  it('lives under ~/.config/tunnel2 when XDG_CONFIG_HOME is unset or not absolute (the XDG rule)', () => {
    const h = home();
    expect(agentKeyDir({ HOME: h })).toBe(join(h, '.config', 'tunnel2'));
    expect(agentKeyDir({ HOME: h, XDG_CONFIG_HOME: 'relative/dir' })).toBe(join(h, '.config', 'tunnel2'));
  });

  it('eight processes creating it at once all end with the same key, and no temporary file is left', async () => {
    const xdg = home();
    const module = fileURLToPath(new URL('../dist/config/agent-key.js', import.meta.url));
    const script = `import(${JSON.stringify(module)}).then((m) => process.stdout.write(m.loadAgentKey({ warn: (l) => process.stderr.write(l) }).key))`;
    const runs = await Promise.all(
      Array.from({ length: 8 }, () =>
        promisify(execFile)(process.execPath, ['-e', script], {
          env: { ...process.env, XDG_CONFIG_HOME: xdg },
        }),
      ),
    );
    expect(runs.map((r) => r.stderr)).toEqual(Array(8).fill(''));
    expect(new Set(runs.map((r) => r.stdout)).size).toBe(1);
    expect(readFileSync(join(xdg, 'tunnel2', 'agent-key'), 'utf8').trim()).toBe(runs[0]!.stdout);
    expect(readdirSync(join(xdg, 'tunnel2'))).toEqual(['agent-key']);
  });

  it('an unreadable key (here a directory in its place) gets one warning and a key for this run, never a throw', () => {
    const xdg = home();
    mkdirSync(join(xdg, 'tunnel2', 'agent-key'), { recursive: true });
    const warnings: string[] = [];
    const key = loadAgentKey({ env: { XDG_CONFIG_HOME: xdg }, warn: (l) => warnings.push(l) });
    expect(key.path).toBeUndefined();
    expect(key.key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(warnings).toEqual([
      `warning: cannot read the agent key ${join(xdg, 'tunnel2', 'agent-key')} (not a regular file (a directory)); using a key for this run only (a restart will not reclaim its names at once)`,
    ]);
  });

  it('a config directory that cannot be created gets one warning and a key for this run', () => {
    const xdg = home();
    // A file where the directory should be.
    const blocked = join(xdg, 'file');
    writeFileSync(blocked, 'x');
    const warnings: string[] = [];
    const key = loadAgentKey({ env: { XDG_CONFIG_HOME: blocked }, warn: (l) => warnings.push(l) });
    expect(key.path).toBeUndefined();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^warning: cannot (create|read) the agent key .* \((ENOTDIR|EEXIST)/);
  });
});

describe('what an edge is told of the key', () => {
  const key = 'k'.repeat(43);

  it('is a hash keyed to the edge host name: one edge cannot claim your names on another', () => {
    const here = agentKeyFor(key, 'https://tunnel.example.com');
    expect(here).not.toContain(key);
    expect(here).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(agentKeyFor(key, 'https://tunnel.example.com/some/path')).toBe(here);
    expect(agentKeyFor(key, 'https://TUNNEL.example.com:443')).toBe(here);
    expect(agentKeyFor(key, 'https://other.example.com')).not.toBe(here);
    expect(agentKeyFor(`${key}x`, 'https://tunnel.example.com')).not.toBe(here);
  });

  it("is the same for every form of one host (scheme, port), so a cluster's nodes on one host are one edge", () => {
    // Nodes of a cluster reached on their own ports, and --server's ws(s):// and http(s):// forms of one
    // edge: a restart after a crash must not be a stranger to its own names on any of them.
    const here = agentKeyFor(key, 'https://tunnel.example.com');
    expect(agentKeyFor(key, 'wss://tunnel.example.com')).toBe(here);
    expect(agentKeyFor(key, 'http://tunnel.example.com:8080')).toBe(here);
    expect(agentKeyFor(key, 'ws://127.0.0.1:4001/')).toBe(agentKeyFor(key, 'http://127.0.0.1:4002'));
  });
});
