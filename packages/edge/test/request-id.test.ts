import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { ensureRequestId, newRequestId } from '../src/public/request-id.js';

function request(rawHeaders: string[]): IncomingMessage {
  const headers: Record<string, string> = {};
  for (let i = 0; i < rawHeaders.length; i += 2) headers[rawHeaders[i]!.toLowerCase()] = rawHeaders[i + 1]!;
  return { headers, rawHeaders } as unknown as IncomingMessage;
}

describe('request ids', () => {
  it('are distinct, short, and share this process prefix', () => {
    const ids = Array.from({ length: 10_000 }, newRequestId);
    expect(new Set(ids).size).toBe(ids.length);
    const prefix = ids[0]!.split('-')[0];
    for (const id of ids) expect(id).toMatch(new RegExp(`^${prefix}-[0-9a-z]{1,11}$`));
  });

  it('keeps an acceptable id from a proxy in front, and replaces an unacceptable one in the forwarded headers', () => {
    const kept = request(['Host', 'a.localhost', 'X-Request-Id', 'lb-trace-0042']);
    expect(ensureRequestId(kept)).toBe('lb-trace-0042');
    expect(kept.rawHeaders).toEqual(['Host', 'a.localhost', 'X-Request-Id', 'lb-trace-0042']);

    const bad = request(['Host', 'a.localhost', 'x-request-id', 'has spaces and\ttabs']);
    const id = ensureRequestId(bad);
    expect(id).toMatch(/^[0-9a-f]{16}-[0-9a-z]+$/);
    expect(bad.rawHeaders).toEqual(['Host', 'a.localhost', 'X-Request-Id', id]);
    expect(bad.headers['x-request-id']).toBe(id);
  });
});
