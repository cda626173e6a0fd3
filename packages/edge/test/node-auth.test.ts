import { describe, expect, it } from 'vitest';
import { NodeAuth, type SignedFields } from '../src/cluster/node-auth.js';

const SECRET = 'a-cluster-secret-of-at-least-32-characters';

const fields: SignedFields = {
  fromNode: 'edge-a',
  method: 'POST',
  target: '/upload?x=1',
  host: 'demo.tunnel.test',
  peer: '10.0.0.9',
  client: '203.0.113.7',
  forwardedFor: '203.0.113.7',
  proto: 'https',
  forwardedHost: 'demo.tunnel.test',
  prefix: '',
};

function withoutNode({ fromNode: _node, ...rest }: SignedFields): Omit<SignedFields, 'fromNode'> {
  return rest;
}

describe('NodeAuth', () => {
  it('verifies its own signature and names the signing node', () => {
    const auth = new NodeAuth(SECRET, () => 1_700_000_000_000);
    const value = auth.sign(fields);
    expect(value).toMatch(/^v1 edge-a 1700000000000 [0-9a-f]{64}$/);
    expect(auth.verify(value, withoutNode(fields))).toEqual({ fromNode: 'edge-a' });
  });

  it.each(Object.keys(withoutNode(fields)) as (keyof Omit<SignedFields, 'fromNode'>)[])(
    'refuses a signature when %s was changed on the way',
    (key) => {
      const auth = new NodeAuth(SECRET, () => 1_700_000_000_000);
      const value = auth.sign(fields);
      expect(auth.verify(value, { ...withoutNode(fields), [key]: `${fields[key]}x` })).toBeUndefined();
    },
  );

  it('refuses a changed node id or timestamp in the value itself', () => {
    const auth = new NodeAuth(SECRET, () => 1_700_000_000_000);
    const [v, , stamp, hex] = auth.sign(fields).split(' ') as [string, string, string, string];
    expect(auth.verify(`${v} edge-b ${stamp} ${hex}`, withoutNode(fields))).toBeUndefined();
    expect(auth.verify(`${v} edge-a ${Number(stamp) + 1} ${hex}`, withoutNode(fields))).toBeUndefined();
  });

  it('refuses a signature made with another secret', () => {
    const now = (): number => 1_700_000_000_000;
    const value = new NodeAuth(`${SECRET}-other`, now).sign(fields);
    expect(new NodeAuth(SECRET, now).verify(value, withoutNode(fields))).toBeUndefined();
  });

  it('accepts clock skew inside 30 s and refuses it outside, both ways', () => {
    let t = 1_700_000_000_000;
    const auth = new NodeAuth(SECRET, () => t);
    const value = auth.sign(fields);
    t += 30_000;
    expect(auth.verify(value, withoutNode(fields))).toEqual({ fromNode: 'edge-a' });
    t += 1;
    expect(auth.verify(value, withoutNode(fields))).toBeUndefined();
    t = 1_700_000_000_000 - 30_001;
    expect(auth.verify(value, withoutNode(fields))).toBeUndefined();
  });

  it('refuses malformed values without throwing (the compare only ever sees two 32-byte MACs)', () => {
    const auth = new NodeAuth(SECRET, () => 1_700_000_000_000);
    const [, , stamp, hex] = auth.sign(fields).split(' ') as [string, string, string, string];
    const bad = [
      '',
      'v1',
      `v2 edge-a ${stamp} ${hex}`,
      `v1 edge-a ${stamp} ${hex.slice(2)}`, // short: timingSafeEqual would throw on a length mismatch
      `v1 edge-a ${stamp} ${hex}00`,
      `v1 edge-a ${stamp} ${hex.toUpperCase()}`,
      `v1 edge-a ${stamp} ${'z'.repeat(64)}`,
      `v1 edge-a -${stamp} ${hex}`,
      `v1 edge-a 1e12 ${hex}`,
      `v1 edge a ${stamp} ${hex}`,
      `v1 edge-a ${stamp} ${hex} extra`,
    ];
    for (const value of bad) expect(auth.verify(value, withoutNode(fields))).toBeUndefined();
  });

  it('refuses a MAC differing only in its last byte (a full-length compare, not a prefix)', () => {
    const auth = new NodeAuth(SECRET, () => 1_700_000_000_000);
    const value = auth.sign(fields);
    const last = value.at(-1) === '0' ? '1' : '0';
    expect(auth.verify(`${value.slice(0, -1)}${last}`, withoutNode(fields))).toBeUndefined();
  });
});

describe('NodeAuth notices', () => {
  const target = '/_tunnel2/node/takeover?name=demo&epoch=7';
  const now = (): number => 1_700_000_000_000;

  it('verifies a notice over its method and target and names the sender', () => {
    const auth = new NodeAuth(SECRET, now);
    const value = auth.signNotice('edge-b', 'POST', target);
    expect(auth.verifyNotice(value, 'POST', target)).toEqual({ fromNode: 'edge-b' });
    expect(auth.verifyNotice(value, 'POST', `${target}1`)).toBeUndefined();
    expect(auth.verifyNotice(value, 'GET', target)).toBeUndefined();
    expect(new NodeAuth(`${SECRET}-other`, now).verifyNotice(value, 'POST', target)).toBeUndefined();
  });

  it('never takes a forwarded request signature for a notice, nor a notice for a forwarded request', () => {
    const auth = new NodeAuth(SECRET, now);
    const hop = { ...fields, method: 'POST', target, host: '', peer: '', client: '', forwardedFor: '' };
    const hopValue = auth.sign({ ...hop, proto: '', forwardedHost: '', prefix: '' });
    expect(auth.verifyNotice(hopValue, 'POST', target)).toBeUndefined();
    const notice = auth.signNotice('edge-a', 'POST', target);
    expect(
      auth.verify(notice, { ...withoutNode(hop), proto: '', forwardedHost: '', prefix: '' }),
    ).toBeUndefined();
  });
});
