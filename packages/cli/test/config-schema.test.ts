import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { HTTP_KEYS, TCP_KEYS, TOP_KEYS } from '../src/config/config-file.js';

interface ObjectSchema {
  properties: Record<string, { const?: string }>;
  additionalProperties: unknown;
}

describe('tunnel2.schema.json', () => {
  it('lists exactly the keys tunnel2 start accepts, at each level', async () => {
    const schema = JSON.parse(
      await readFile(new URL('../tunnel2.schema.json', import.meta.url), 'utf8'),
    ) as ObjectSchema & { properties: { tunnels: { additionalProperties: { oneOf: ObjectSchema[] } } } };
    // An editor that accepts a key start refuses (or the reverse) is worse than no schema.
    expect(Object.keys(schema.properties).sort()).toEqual([...TOP_KEYS].sort());
    const [http, tcp] = schema.properties.tunnels.additionalProperties.oneOf;
    expect(http?.properties.proto?.const).toBe('http');
    expect(Object.keys(http?.properties ?? {}).sort()).toEqual([...HTTP_KEYS].sort());
    expect(tcp?.properties.proto?.const).toBe('tcp');
    expect(Object.keys(tcp?.properties ?? {}).sort()).toEqual([...TCP_KEYS].sort());
  });
});
