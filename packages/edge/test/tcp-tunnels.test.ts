import { connect } from 'node:net';
import { ErrorCode } from '@tunnel2/protocol';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AgentConnection } from '../src/agent-connection.js';
import { EdgeErrorCode } from '../src/errors.js';
import { type TcpPort, TcpTunnels } from '../src/tcp-tunnels.js';
import { freeRange } from './support/free-range.js';

const GRACE_MS = 60_000;
const tunnels: TcpTunnels[] = [];

afterEach(() => {
  vi.useRealTimers();
  for (const t of tunnels.splice(0)) t.close();
});

async function createTunnels(size = 1): Promise<TcpTunnels> {
  const t = new TcpTunnels({
    range: await freeRange(size),
    host: '127.0.0.1',
    maxPortsPerOwner: 10,
    reconnectGraceMs: GRACE_MS,
    logger: pino({ level: 'silent' }),
  });
  tunnels.push(t);
  return t;
}

/** The part of an agent connection TcpTunnels touches: close() when a newer session takes the port. */
function agent(): AgentConnection & { closedWith: number[] } {
  const closedWith: number[] = [];
  return { closedWith, close: (code: number) => void closedWith.push(code) } as unknown as AgentConnection & {
    closedWith: number[];
  };
}

async function claimed(t: TcpTunnels, owner: string, port?: number): Promise<TcpPort> {
  const claim = await t.claim(owner, port);
  if (!claim.ok) throw new Error(claim.message);
  return claim.port;
}

/** Whether something still listens on the port (only a refused connect means the listener is gone). */
async function listening(port: number): Promise<boolean> {
  const socket = connect({ port, host: '127.0.0.1' });
  const result = await new Promise<boolean>((resolve) => {
    socket.once('connect', () => resolve(true));
    // A listener whose port has no ready session resets the connection, maybe before 'connect' is seen.
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code !== 'ECONNREFUSED'));
  });
  socket.destroy();
  return result;
}

/** Fake timers on; a port whose session `a` served it and then ended (its grace running), reclaimed. */
async function reclaimedInGrace(): Promise<{ t: TcpTunnels; port: TcpPort }> {
  const t = await createTunnels();
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  const a = agent();
  const port = await claimed(t, 'owner');
  t.attach(port, a);
  t.detach(port, a);
  // Its owner reconnects: the claim finds the port held for it.
  expect(await claimed(t, 'owner', port.port)).toBe(port);
  return { t, port };
}

describe('TcpTunnels', () => {
  it("keeps the port for a newer session whose older one dies before the newer one's HELLO", async () => {
    const t = await createTunnels();
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const a = agent();
    const port = await claimed(t, 'owner');
    t.attach(port, a);
    // Agent B of the same owner claims the port while A holds it...
    expect(await claimed(t, 'owner', port.port)).toBe(port);
    // ...A dies first (the port goes into grace), then B's HELLO arrives.
    t.detach(port, a);
    const b = agent();
    t.attach(port, b);
    vi.advanceTimersByTime(GRACE_MS + 1);
    vi.useRealTimers();
    expect(t.size).toBe(1);
    expect(port.connection).toBe(b);
    expect(await listening(port.port)).toBe(true);
  });

  it('keeps a reserved port in its grace when a reconnect inside the grace fails before its session', async () => {
    const { t, port } = await reclaimedInGrace();
    // The reconnect's upgrade fails (registry down, socket gone).
    t.abandon(port);
    expect(t.size).toBe(1);
    // The next reconnect still finds it; without one, the grace ends and the port is freed.
    vi.advanceTimersByTime(GRACE_MS + 1);
    vi.useRealTimers();
    expect(t.size).toBe(0);
  });

  it('a session whose port was released while it came up is closed, so its agent claims it afresh', async () => {
    const { t, port } = await reclaimedInGrace();
    // A reconnect near the end of the grace: the grace runs out before its HELLO.
    vi.advanceTimersByTime(GRACE_MS + 1);
    const b = agent();
    t.attach(port, b);
    expect(b.closedWith).toEqual([ErrorCode.INTERNAL_ERROR]);
    t.detach(port, b);
    expect(t.size).toBe(0);
    vi.useRealTimers();
    expect(await claimed(t, 'owner', port.port)).not.toBe(port);
  });

  it('frees at once a claim that never had a session', async () => {
    const t = await createTunnels();
    const port = await claimed(t, 'owner');
    t.abandon(port);
    expect(t.size).toBe(0);
    expect(await listening(port.port)).toBe(false);
  });

  it('stops a running claim when the edge closes, binding no further port', async () => {
    const t = await createTunnels(16);
    const claim = t.claim('owner', undefined);
    t.close();
    expect(await claim).toMatchObject({ ok: false, code: EdgeErrorCode.DRAINING });
    expect(await t.claim('owner', undefined)).toMatchObject({ ok: false, code: EdgeErrorCode.DRAINING });
    expect(t.size).toBe(0);
  });
});
