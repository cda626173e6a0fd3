import { createMemoryRegistry, type ReplicaSetRegistry, type SessionRegistry } from '@tunnel2/registry';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createFakeClock } from '../../registry/test/fake-clock.js';
import { registryContract } from '../../registry/test/registry-contract.js';
import { replicaSetContract } from '../../registry/test/replica-set-contract.js';
import { IpcRegistry, RestartBudget, serveRegistryCall, type WorkerChannel } from '../src/index.js';

// A worker's registry (`--workers N`) is the primary's, reached over node:cluster's IPC channel. Here the
// channel is two in-process queues that carry every message through JSON, as the IPC channel does (so
// `undefined` answers, error codes and records survive the trip only if the two sides make them).

type Message = Parameters<WorkerChannel['send']>[0];

/** A worker channel to `registry`, served as the primary serves it; `stall` stops answering. */
function channelTo(registry: SessionRegistry & ReplicaSetRegistry): {
  channel: WorkerChannel;
  stall(): void;
} {
  const handlers = new Set<(message: never) => void>();
  let stalled = false;
  const channel: WorkerChannel = {
    send(message: Message) {
      const carried = JSON.parse(JSON.stringify(message)) as Message;
      if (carried.t !== 'registry' || stalled) return;
      serveRegistryCall(registry, carried, (reply) => {
        const back = JSON.parse(JSON.stringify(reply)) as never;
        setImmediate(() => {
          for (const handler of handlers) handler(back);
        });
      });
    },
    onMessage(handler) {
      handlers.add(handler as (message: never) => void);
      return () => handlers.delete(handler as (message: never) => void);
    },
  };
  return {
    channel,
    stall: () => {
      stalled = true;
    },
  };
}

registryContract('ipc (a worker of --workers N)', async (clock) => {
  const primary = createMemoryRegistry({ clock: clock.now });
  const registry = new IpcRegistry(channelTo(primary).channel);
  return {
    registry,
    cleanup: async () => {
      await registry.close();
      await primary.close();
    },
  };
});

replicaSetContract('ipc (a worker of --workers N)', async (clock) => {
  const primary = createMemoryRegistry({ clock: clock.now });
  const registry = new IpcRegistry(channelTo(primary).channel);
  return {
    registry,
    cleanup: async () => {
      await registry.close();
      await primary.close();
    },
  };
});

describe('IpcRegistry', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('rejects as unavailable when the primary does not answer in time, and bounds the calls waiting', async () => {
    vi.useFakeTimers();
    const primary = createMemoryRegistry({ clock: createFakeClock().now });
    const { channel, stall } = channelTo(primary);
    stall();
    const registry = new IpcRegistry(channel, { timeoutMs: 1_000, maxPending: 2 });
    const first = registry.lookup('a');
    const second = registry.ping();
    // A third call while two wait: refused at once rather than queued without bound.
    await expect(registry.lookup('c')).rejects.toMatchObject({ code: 'TUNNEL2_ERR_REGISTRY_UNAVAILABLE' });
    vi.advanceTimersByTime(1_000);
    await expect(first).rejects.toMatchObject({ code: 'TUNNEL2_ERR_REGISTRY_UNAVAILABLE' });
    await expect(second).rejects.toMatchObject({ code: 'TUNNEL2_ERR_REGISTRY_UNAVAILABLE' });
    await registry.close();
    await primary.close();
  });

  it('cannot close the registry its sibling workers share', async () => {
    const primary = createMemoryRegistry();
    const replies: unknown[] = [];
    serveRegistryCall(primary, { t: 'registry', id: 1, method: 'close' as 'ping', args: [] }, (reply) =>
      replies.push(reply),
    );
    expect(replies).toEqual([expect.objectContaining({ ok: false })]);
    await expect(primary.ping()).resolves.toBeUndefined();
    await primary.close();
  });
});

describe('RestartBudget', () => {
  it('restarts at once, then backs off, and gives up past the deaths allowed in the window', () => {
    let now = 0;
    const budget = new RestartBudget(4, 60_000, () => now);
    expect([budget.nextDelay(), budget.nextDelay(), budget.nextDelay(), budget.nextDelay()]).toEqual([
      0, 100, 200, 400,
    ]);
    expect(budget.nextDelay()).toBeUndefined();
    now += 60_001;
    expect(budget.nextDelay()).toBe(0);
  });
});
