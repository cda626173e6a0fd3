import { expect, it } from 'vitest';
import { createMemoryRegistry } from '../src/index.js';
import { createFakeClock, registryContract } from './registry-contract.js';

registryContract('memory', async (clock) => {
  const registry = createMemoryRegistry({ clock: clock.now });
  return { registry, cleanup: () => registry.close() };
});

it('a closed memory registry refuses work with a typed error', async () => {
  const registry = createMemoryRegistry({ clock: createFakeClock().now });
  await registry.close();
  await expect(registry.lookup('x')).rejects.toMatchObject({ code: 'TUNNEL2_ERR_REGISTRY_CLOSED' });
});

it('rejects a negative ttl naming the argument', async () => {
  const registry = createMemoryRegistry();
  await expect(registry.claim({ name: 'a', owner: 'o', nodeId: 'n', ttlMs: -1 })).rejects.toMatchObject({
    code: 'TUNNEL2_ERR_REGISTRY_INVALID_ARGUMENT',
  });
  await registry.close();
});
