import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { buildEdge } from '../src/build-edge.js';
import { edgeAddresses } from '../src/edge-addresses.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('the addresses the banner and the landing page give', () => {
  it('tell an agent the tunnel2 command, never `npx tunnel2` (an unrelated npm package outside the repository)', () => {
    const addresses = edgeAddresses(new URL('https://tunnel.example.com'));
    expect(addresses.agentCommand).toBe('tunnel2 http <port> --server https://tunnel.example.com');
    expect(addresses.tunnelByHost).toBe('https://<name>.tunnel.example.com/');
    expect(addresses.tunnelByPath).toBe('https://tunnel.example.com/session/<name>/');
  });

  it('the landing page says the same command', async () => {
    const edge = buildEdge({ port: 0, logger: pino({ level: 'silent' }) });
    const { port } = await edge.listen();
    cleanups.push(() => edge.close(0));
    const page = await (
      await fetch(`http://127.0.0.1:${port}/`, { headers: { host: `localhost:${port}` } })
    ).text();
    expect(page).toContain(`Agents connect with:  ${edge.addresses().agentCommand}\n`);
    expect(page).not.toContain('npx tunnel2');
  });
});
