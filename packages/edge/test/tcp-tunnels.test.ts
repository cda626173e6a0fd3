import { connect } from 'node:net';
import { ErrorCode } from '@tunnel2/protocol';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AgentConnection } from '../src/agents/agent-connection.js';
import type { TcpPort } from '../src/agents/tcp-port.js';
import { EdgeErrorCode } from '../src/errors.js';
import { TcpTunnels } from '../src/tcp/tcp-tunnels.js';
import { freeRange } from './support/free-range.js';

const GRACE_MS = 60_000;
const tunnels: TcpTunnels[] = [];

afterEach(() => {
  vi.useRealTimers();
  for (const t of tunnels.splice(0)) t.close();
});

async function createTunnels(size = 1, maxPortsPerOwner = 10): Promise<TcpTunnels> {
  const t = new TcpTunnels({
    range: await freeRange(size),
    host: '127.0.0.1',
    maxPortsPerOwner,
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

async function claimed(t: TcpTunnels, owner: string, port?: number, address?: string): Promise<TcpPort> {
  const claim = await t.claim(owner, port, address);
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

/** A session served the port and ended: the port is in its owner's reconnect grace. */
/** `port` was given back: nothing listens on it any more, unless `next` (the claim that took its place) took that number. */
async function gone(port: TcpPort, next: TcpPort): Promise<boolean> {
  return next.port === port.port ? next !== port : !(await listening(port.port));
}

function served(t: TcpTunnels, port: TcpPort): void {
  const a = agent();
  t.attach(port, a);
  t.detach(port, a);
}

// Issue #29, defect 2: a closed tunnel's port stays reserved for the grace, and an anonymous owner is only
// its agent key, new per connection: opening and closing tunnels in a loop took every port of the range.
describe('TcpTunnels: ports held in grace count against their owner', () => {
  it("gives back the owner's oldest port in its grace to make room, never holding more than the limit", async () => {
    const t = await createTunnels(8, 2);
    const first = await claimed(t, 'token');
    served(t, first);
    const second = await claimed(t, 'token');
    served(t, second);
    // A developer restarting an agent (a new port each time) is not locked out for the grace...
    const third = await claimed(t, 'token');
    // ...its oldest reservation goes instead, and it never holds more than its limit. (The new claim may
    // land on the port number just freed: the range is 8 ports, picked from a random start.)
    expect(t.size).toBe(2);
    expect(await gone(first, third)).toBe(true);
    expect(await listening(second.port)).toBe(true);
    t.attach(third, agent());
    const fourth = await claimed(t, 'token');
    expect(await gone(second, fourth)).toBe(true);
    expect(t.size).toBe(2);
  });

  it('never gives up a port in its grace that was just handed back to its own reconnect, before it attaches', async () => {
    const t = await createTunnels(8, 2);
    const old = await claimed(t, 'token');
    served(t, old);
    const other = await claimed(t, 'token');
    served(t, other);
    // The owner reconnects for `old`; before that session's HELLO, another claim of the same token comes.
    expect(await claimed(t, 'token', old.port)).toBe(old);
    const fresh = await claimed(t, 'token');
    // The room was made from `other`, not from the port its owner is coming back to.
    expect(fresh).not.toBe(old);
    expect(await listening(old.port)).toBe(true);
    expect(await gone(other, fresh)).toBe(true);
    const session = agent();
    t.attach(old, session);
    expect(session.closedWith).toEqual([]);
  });

  it("refuses a claim over the limit when none of the owner's ports is in its grace", async () => {
    const t = await createTunnels(8, 2);
    const live = await claimed(t, 'token');
    t.attach(live, agent());
    // Claimed, its session still coming up: in use, not a reservation to give back.
    await claimed(t, 'token');
    expect(await t.claim('token', undefined)).toMatchObject({
      ok: false,
      code: EdgeErrorCode.TOO_MANY_TCP_PORTS,
      message: expect.stringContaining('agent token'),
    });
    // Its own port again (a reconnect) is not one more port.
    expect(await claimed(t, 'token', live.port)).toBe(live);
    expect(await t.claim('other-token', undefined)).toMatchObject({ ok: true });
  });

  it('counts anonymous agents by client address: new keys in a loop hold at most the limit, others get ports', async () => {
    const t = await createTunnels(8, 2);
    for (let i = 0; i < 20; i++) {
      const port = await claimed(t, `anonymous-key-${i}`, undefined, '127.0.0.1');
      served(t, port);
      expect(t.size).toBeLessThanOrEqual(2);
    }
    // Another address, and a token, still find free ports: the range never runs out.
    await claimed(t, 'anonymous-key-victim', undefined, '127.0.0.2');
    await claimed(t, 'token');
    expect(t.size).toBe(4);
    // Live (not in grace) ports of an address are refused past the limit, whatever the key.
    const a = await claimed(t, 'anonymous-key-a', undefined, '127.0.0.3');
    t.attach(a, agent());
    t.attach(await claimed(t, 'anonymous-key-b', undefined, '127.0.0.3'), agent());
    expect(await t.claim('anonymous-key-c', undefined, '127.0.0.3')).toMatchObject({
      ok: false,
      code: EdgeErrorCode.TOO_MANY_TCP_PORTS,
      message: expect.stringContaining('from this address'),
    });
  });
});

// "Restart keeps your name": an agent's graceful close frees its port at once, unless its owner's newer
// claim already holds it (that claim's session attaches after the older one ends).
describe('TcpTunnels: a graceful close', () => {
  const leavingAgent = (): AgentConnection & { closedWith: number[] } =>
    Object.assign(agent(), { leaving: true, connection: undefined as unknown });

  it('frees the port at once: another owner gets it, with no grace', async () => {
    const t = await createTunnels();
    const port = await claimed(t, 'owner-a');
    const a = leavingAgent();
    t.attach(port, a);
    t.detach(port, a);
    const other = await claimed(t, 'owner-b', port.port);
    expect(other.port).toBe(port.port);
  });

  it("keeps the port for its owner's newer claim made before the older session ended", async () => {
    const t = await createTunnels();
    const port = await claimed(t, 'owner-a');
    const a = leavingAgent();
    t.attach(port, a);
    const again = await claimed(t, 'owner-a', port.port);
    t.detach(port, a);
    const b = agent();
    t.attach(again, b);
    expect(b.closedWith).toEqual([]);
    expect(await listening(port.port)).toBe(true);
    const other = await t.claim('owner-b', port.port);
    expect(other.ok).toBe(false);
  });
});
