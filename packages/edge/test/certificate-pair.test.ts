import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { choosePair, loadCertificatePair } from '../src/listeners/certificate-pair.js';
import { selfSigned } from './support/self-signed.js';

// Which certificate a TLS client's SNI name gets (RFC 6125 §6.4 as browsers apply it), and the names a
// certificate is read for.

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tunnel2-pair-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('choosePair', () => {
  const apex = { id: 'apex', names: ['tunnel.test'] };
  const wildcard = { id: 'wildcard', names: ['*.tunnel.test'] };
  const special = { id: 'special', names: ['special.tunnel.test'] };
  const partial = { id: 'partial', names: ['f*.other.test', '*x.other.test', 'a.*.other.test'] };
  const pairs = [apex, wildcard, special, partial];
  const chosen = (servername: string | undefined): string | undefined => choosePair(pairs, servername)?.id;

  it('prefers an exact name, then a wildcard covering exactly one label, else the first pair', () => {
    expect(chosen('tunnel.test')).toBe('apex');
    expect(chosen('special.tunnel.test')).toBe('special');
    expect(chosen('demo.tunnel.test')).toBe('wildcard');
    expect(chosen('a.b.tunnel.test')).toBe('apex');
    expect(chosen('elsewhere.test')).toBe('apex');
    expect(chosen(undefined)).toBe('apex');
    expect(chosen('')).toBe('apex');
  });

  it('compares without case and without the trailing dot of an absolute name', () => {
    expect(chosen('DEMO.Tunnel.TEST')).toBe('wildcard');
    expect(chosen('special.tunnel.test.')).toBe('special');
    expect(chosen('demo.tunnel.test.')).toBe('wildcard');
  });

  it('never matches a partial-label wildcard or a wildcard that is not the leftmost label', () => {
    for (const name of ['foo.other.test', 'fx.other.test', 'a.b.other.test', 'a.x.other.test']) {
      expect(chosen(name), name).toBe('apex');
    }
  });

  it('gives nothing a wildcard covers to an empty leftmost label', () => {
    expect(chosen('.tunnel.test')).toBe('apex');
  });
});

describe('loadCertificatePair', () => {
  it('reads the SAN DNS names in lower case and without a trailing dot, and only them when there are some', async () => {
    const files = await selfSigned(dir, 'san', {
      cn: 'cn.test',
      san: 'DNS:Tunnel.Test.,DNS:*.Tunnel.test,IP:127.0.0.1',
    });
    const pair = loadCertificatePair(files);
    expect(pair.names).toEqual(['tunnel.test', '*.tunnel.test']);
    expect(choosePair([{ names: ['first.test'] }, pair], 'demo.tunnel.test')).toBe(pair);
    expect(choosePair([{ names: ['first.test'] }, pair], 'tunnel.test')).toBe(pair);
  });

  it('falls back to the CN of a certificate without SAN DNS names', async () => {
    const pair = loadCertificatePair(await selfSigned(dir, 'cn', { cn: 'Old.Style.Test' }));
    expect(pair.names).toEqual(['old.style.test']);
  });
});
