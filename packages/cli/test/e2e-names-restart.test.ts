import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect, connectTcp } from '../src/index.js';
import { cli, type Spawned, spawnCli } from './support/processes.js';
import { ptyCli } from './support/pty-cli.js';
import { silent } from './support/stack.js';
import { portRange } from './support/tcp-stack.js';

// "Restart keeps your name": a token-less CLI keeps its agent key in its config directory, a graceful close
// frees its names at once, a crash leaves them reserved for that key alone, and refusals say who holds a name.

let edge: Edge;
let url: string;
const dirs: string[] = [];
const cleanups: (() => void)[] = [];

beforeAll(async () => {
  edge = buildEdge({ port: 0, logger: silent });
  ({ url } = await edge.listen());
});
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});
afterAll(async () => {
  await edge.close(0);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A user's config directory (XDG_CONFIG_HOME): runs given the same one are the same user's agent. */
function configHome(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tunnel2-names-'));
  dirs.push(dir);
  return dir;
}

function agent(name: string, home: string): Spawned {
  const run = spawnCli(['http', '1', '--server', url, '--subdomain', name, '--json', '--no-inspect'], {
    XDG_CONFIG_HOME: home,
  });
  cleanups.push(() => run.kill('SIGKILL'));
  return run;
}

function httpOnce(name: string, home: string) {
  return cli(['http', '1', '--server', url, '--subdomain', name, '--no-inspect'], { XDG_CONFIG_HOME: home });
}

describe('restart keeps your name', () => {
  it('Ctrl-C in a terminal, then the same command at once gets the same name; the name was free meanwhile', async () => {
    const home = configHome();
    const tty = ptyCli(['http', '1', '--server', url, '--subdomain', 'restart-int', '--no-inspect'], {
      env: { XDG_CONFIG_HOME: home },
    });
    cleanups.push(() => tty.kill());
    await tty.waitForScreen((lines) => lines.some((l) => l.includes('restart-int.')), 'the tunnel URL');
    tty.signal('INT');
    expect(await tty.exited).toBe(0);
    // Freed, not merely kept for this key: another agent may have it at once.
    expect(await edge.sessions.lookup('restart-int')).toBeUndefined();

    const again = agent('restart-int', home);
    expect((await again.waitFor('ready')).name).toBe('restart-int');
    again.kill('SIGTERM');
    expect(await again.exited).toBe(0);
    const other = agent('restart-int', configHome());
    expect((await other.waitFor('ready')).name).toBe('restart-int');
  });

  it('the key is created 0600 in a 0700 directory under XDG_CONFIG_HOME, and two runs started together share it', async () => {
    const home = configHome();
    const a = agent('together-a', home);
    const b = agent('together-b', home);
    await Promise.all([a.waitFor('ready'), b.waitFor('ready')]);
    expect(statSync(join(home, 'tunnel2')).mode & 0o777).toBe(0o700);
    expect(statSync(join(home, 'tunnel2', 'agent-key')).mode & 0o777).toBe(0o600);
    expect(edge.sessions.get('together-a')?.owner).toBe(edge.sessions.get('together-b')?.owner);
  });

  it('after a crash (SIGKILL) the same key reclaims at once; another key is told it is reserved and when it frees', async () => {
    const home = configHome();
    const first = agent('restart-kill', home);
    await first.waitFor('ready');
    first.kill('SIGKILL');
    await first.exited;

    const stranger = await httpOnce('restart-kill', configHome());
    expect(stranger.code).toBe(1);
    expect(stranger.stderr).toMatch(
      /edge refused the tunnel \(409\): subdomain "restart-kill" is reserved for the agent that disconnected \d+ s ago, free in \d+ s\. Wait for it, or choose another --subdomain/,
    );
    expect(stranger.stderr).not.toContain('another agent');

    const again = agent('restart-kill', home);
    expect((await again.waitFor('ready')).name).toBe('restart-kill');
  });

  it('a second run of the same key is refused while the first serves the name, and the first keeps it', async () => {
    const home = configHome();
    const first = agent('twice', home);
    await first.waitFor('ready');
    const second = await httpOnce('twice', home);
    expect(second.code).toBe(1);
    expect(second.stderr).toMatch(
      /subdomain "twice" is already served by another tunnel2 run of yours, since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: stop that one first/,
    );
    expect(first.events.filter((e) => e.event === 'error' || e.event === 'reconnecting')).toEqual([]);
    expect(edge.sessions.get('twice')).toBeDefined();
  });

  it('a second run of the same key is refused a TCP port the first serves, and the first keeps it', async () => {
    const tcpEdge = buildEdge({ port: 0, logger: silent, tcpPorts: portRange() });
    const edgeUrl = (await tcpEdge.listen()).url;
    cleanups.push(() => void tcpEdge.close(0));
    const home = configHome();
    const first = spawnCli(['tcp', '1', '--server', edgeUrl, '--json'], { XDG_CONFIG_HOME: home });
    cleanups.push(() => first.kill('SIGKILL'));
    const port = Number(new URL(String((await first.waitFor('ready')).url)).port);
    const second = await cli(['tcp', '1', '--server', edgeUrl, '--remote-port', String(port)], {
      XDG_CONFIG_HOME: home,
    });
    expect(second.code).toBe(1);
    expect(second.stderr).toMatch(
      new RegExp(
        `port ${port} is already served by another tunnel2 run of yours, since \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ: stop that one first`,
      ),
    );
    expect(first.events.filter((e) => e.event === 'error' || e.event === 'reconnecting')).toEqual([]);
  });

  it("a name another agent serves is 'taken by another agent'", async () => {
    const first = agent('theirs', configHome());
    await first.waitFor('ready');
    const mine = await httpOnce('theirs', configHome());
    expect(mine.code).toBe(1);
    expect(mine.stderr).toContain(
      'edge refused the tunnel (409): subdomain "theirs" is taken by another agent.',
    );
  });

  it('a malformed key file gets one warning line and a key for this run; the tunnel still comes up', async () => {
    const home = configHome();
    const first = agent('malformed-a', home);
    await first.waitFor('ready');
    writeFileSync(join(home, 'tunnel2', 'agent-key'), 'not a key\n');
    const run = agent('malformed-b', home);
    expect((await run.waitFor('ready')).name).toBe('malformed-b');
    const warnings = run
      .stderr()
      .split('\n')
      .filter((line) => line.includes('agent key'));
    expect(warnings).toEqual([
      `tunnel2: warning: the agent key ${join(home, 'tunnel2', 'agent-key')} is malformed (delete it to make a new one); using a key for this run only (a restart will not reclaim its names at once)`,
    ]);
  });

  it("tunnel.close() of a library user frees the name at once (its key is the Tunnel's own)", async () => {
    const tunnel = await connect({ target: 1, server: url, subdomain: 'library-close' });
    await tunnel.close();
    const next = await connect({ target: 1, server: url, subdomain: 'library-close' });
    expect(next.info?.name).toBe('library-close');
    await next.close(0);
  });

  it("a TCP tunnel's graceful close frees its port at once; another agent gets it", async () => {
    const tcpEdge = buildEdge({ port: 0, logger: silent, tcpPorts: portRange() });
    const edgeUrl = (await tcpEdge.listen()).url;
    try {
      const first = await connectTcp({ target: 1, server: edgeUrl });
      const port = first.info?.tcp?.port;
      await first.close();
      const next = await connectTcp({ target: 1, server: edgeUrl, remotePort: port });
      expect(next.info?.tcp?.port).toBe(port);
      await next.close(0);
    } finally {
      await tcpEdge.close(0);
    }
  });

  it('tunnel2 tcp and tunnel2 start use the key too: after a crash the same command gets its port and names back', async () => {
    const tcpEdge = buildEdge({ port: 0, logger: silent, tcpPorts: portRange() });
    const edgeUrl = (await tcpEdge.listen()).url;
    cleanups.push(() => void tcpEdge.close(0));
    const home = configHome();
    const tcp = () => {
      const run = spawnCli(['tcp', '1', '--server', edgeUrl, '--json'], { XDG_CONFIG_HOME: home });
      cleanups.push(() => run.kill('SIGKILL'));
      return run;
    };
    const first = tcp();
    const port = Number(new URL(String((await first.waitFor('ready')).url)).port);
    first.kill('SIGKILL');
    await first.exited;
    const again = spawnCli(['tcp', '1', '--server', edgeUrl, '--remote-port', String(port), '--json'], {
      XDG_CONFIG_HOME: home,
    });
    cleanups.push(() => again.kill('SIGKILL'));
    expect(new URL(String((await again.waitFor('ready')).url)).port).toBe(String(port));

    const config = join(configHome(), 'tunnel2.yml');
    writeFileSync(
      config,
      `server: ${url}\ntunnels:\n  web: { target: 1, subdomain: start-web, inspect: false }\n`,
    );
    const start = () => {
      const run = spawnCli(['start', '--all', '--config', config, '--json'], { XDG_CONFIG_HOME: home });
      cleanups.push(() => run.kill('SIGKILL'));
      return run;
    };
    const before = start();
    expect((await before.waitFor('ready')).name).toBe('start-web');
    before.kill('SIGKILL');
    await before.exited;
    expect((await start().waitFor('ready')).name).toBe('start-web');
  });
});
