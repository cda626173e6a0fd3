import { buildEdge, type Edge, randomSessionName, reservedNames } from '@tunnel2/edge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../src/index.js';
import { cli } from './support/processes.js';
import { silent } from './support/stack.js';

let edge: Edge;
let url: string;
beforeAll(async () => {
  edge = buildEdge({ port: 0, logger: silent });
  ({ url } = await edge.listen());
});
afterAll(() => edge.close(0));

describe('session names', () => {
  it('every reserved name is refused with 403 TUNNEL2_ERR_RESERVED_NAME saying so', async () => {
    expect([...reservedNames]).toEqual(expect.arrayContaining(['www', 'api', 'admin']));
    for (const name of reservedNames) {
      await expect(connect({ target: 1, server: url, subdomain: name })).rejects.toMatchObject({
        status: 403,
        edgeCode: 'TUNNEL2_ERR_RESERVED_NAME',
        fatal: true,
        message: expect.stringContaining(`"${name}" is reserved`),
      });
    }
    expect(edge.sessions.size).toBe(0);
  });

  it('the CLI prints one line naming the reserved subdomain and exits 1', async () => {
    const { code, stderr } = await cli(['http', '1', '--server', url, '--subdomain', 'www']);
    expect(code).toBe(1);
    expect(stderr).toContain('"www" is reserved');
    expect(stderr).not.toContain('    at ');
  });

  it('random names are 26 base32 characters (130 bits), all distinct, every character equally likely', () => {
    const names = Array.from({ length: 20_000 }, () => randomSessionName());
    expect(new Set(names).size).toBe(names.length);
    const counts = new Map<string, number>();
    for (const name of names) {
      expect(name).toMatch(/^[a-z2-7]{26}$/);
      for (const c of name) counts.set(c, (counts.get(c) ?? 0) + 1);
    }
    // 32 symbols × 26 positions = 130 bits only if every symbol is used about equally.
    expect(counts.size).toBe(32);
    const expected = (20_000 * 26) / 32;
    for (const count of counts.values()) expect(Math.abs(count - expected) / expected).toBeLessThan(0.05);
  });

  it('an agent that asks for no name gets a random one', async () => {
    const a = await connect({ target: 1, server: url });
    const b = await connect({ target: 1, server: url });
    try {
      expect(a.info?.name).toMatch(/^[a-z2-7]{26}$/);
      expect(b.info?.name).toMatch(/^[a-z2-7]{26}$/);
      expect(a.info?.name).not.toBe(b.info?.name);
    } finally {
      await a.close(0);
      await b.close(0);
    }
  });
});
