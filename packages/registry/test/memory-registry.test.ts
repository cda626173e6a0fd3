import { afterEach, describe, expect, it, vi } from 'vitest';
import { createMemoryRegistry, RegistryError, RegistryErrorCode } from '../src/index.js';
import { createFakeClock } from './fake-clock.js';
import { registryContract } from './registry-contract.js';
import { replicaSetContract } from './replica-set-contract.js';

registryContract('memory', async (clock) => {
  const registry = createMemoryRegistry({ clock: clock.now });
  return { registry, cleanup: () => registry.close() };
});

describe('memory registry', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('drops expired records from memory on the next write once the sweep interval has passed', async () => {
    const clock = createFakeClock();
    const registry = createMemoryRegistry({ clock: clock.now, sweepIntervalMs: 10_000 });
    for (let i = 0; i < 1_000; i++)
      await registry.claim({ name: `n${i}`, owner: 'o', nodeId: 'a', ttlMs: 1_000 });
    expect(registry.size).toBe(1_000);
    clock.advance(10_000);
    await registry.claim({ name: 'fresh', owner: 'o', nodeId: 'a', ttlMs: 1_000 });
    expect(registry.size).toBe(1);
    await registry.close();
  });

  it('drops an expired record when it is looked up, and sweeps on list', async () => {
    const clock = createFakeClock();
    const registry = createMemoryRegistry({ clock: clock.now });
    await registry.claim({ name: 'a', owner: 'o', nodeId: 'n', ttlMs: 1_000 });
    await registry.claim({ name: 'b', owner: 'o', nodeId: 'n', ttlMs: 1_000 });
    clock.advance(1_000);
    expect(registry.size).toBe(2);
    await registry.lookup('a');
    expect(registry.size).toBe(1);
    await registry.list();
    expect(registry.size).toBe(0);
    await registry.close();
  });

  it('sweeps on its timer even when nobody calls it', async () => {
    vi.useFakeTimers({ now: 1_700_000_000_000 });
    const registry = createMemoryRegistry({ sweepIntervalMs: 5_000 });
    await registry.claim({ name: 'a', owner: 'o', nodeId: 'n', ttlMs: 1_000 });
    vi.advanceTimersByTime(5_000);
    expect(registry.size).toBe(0);
    await registry.close();
  });

  it('does not keep the process alive with its timer', async () => {
    const registry = createMemoryRegistry();
    const before = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const other = createMemoryRegistry();
    expect(process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length).toBe(before);
    await registry.close();
    await other.close();
  });

  it('validates its options', () => {
    for (const sweepIntervalMs of [0, -1, 1.5, Number.NaN]) {
      expect(() => createMemoryRegistry({ sweepIntervalMs })).toThrow(
        expect.objectContaining({ code: RegistryErrorCode.INVALID_ARGUMENT }),
      );
    }
  });

  it('throws branded errors with stable codes', async () => {
    const registry = createMemoryRegistry();
    await registry.close();
    const err: unknown = await registry.ping().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RegistryError);
    expect(RegistryError.isRegistryError(err)).toBe(true);
    expect(err).toMatchObject({ name: 'RegistryError', code: 'TUNNEL2_ERR_REGISTRY_CLOSED' });
    expect(RegistryError.isRegistryError(new Error('x'))).toBe(false);
    // The brand is shared with @tunnel2/protocol's Tunnel2Error, so the edge sees a tunnel2 error.
    expect((err as Record<symbol, unknown>)[Symbol.for('tunnel2.error')]).toBe(true);
  });
});

replicaSetContract('memory', async (clock) => {
  const registry = createMemoryRegistry({ clock: clock.now });
  return { registry, cleanup: () => registry.close() };
});
