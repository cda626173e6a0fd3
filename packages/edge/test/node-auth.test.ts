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

describe('NodeAuth links (v2: target node and nonce)', () => {
  const now = (): number => 1_700_000_000_000;
  const host = '10.0.0.2:8080';

  it('verifies a link signed for this node and names the sender, the nonce and when it stops verifying', () => {
    const auth = new NodeAuth(SECRET, now);
    const { value, nonce } = auth.signLink('edge-a', 'edge-b', host);
    expect(value).toMatch(/^v2 edge-a edge-b 1700000000000 [0-9a-f]{32} [0-9a-f]{64}$/);
    expect(auth.verifyLink(value, host, 'edge-b')).toEqual({
      kind: 'valid',
      fromNode: 'edge-a',
      nonce,
      expiresAt: 1_700_000_000_000 + 30_000,
    });
  });

  it('signs a fresh nonce every time', () => {
    const auth = new NodeAuth(SECRET, now);
    expect(auth.signLink('edge-a', 'edge-b', host).nonce).not.toBe(
      auth.signLink('edge-a', 'edge-b', host).nonce,
    );
  });

  it('names a genuine link signed for another node misdirected, only once its MAC verified', () => {
    const auth = new NodeAuth(SECRET, now);
    const { value } = auth.signLink('edge-a', 'edge-b', host);
    expect(auth.verifyLink(value, host, 'edge-c')).toEqual({
      kind: 'misdirected',
      fromNode: 'edge-a',
      toNode: 'edge-b',
    });
    expect(new NodeAuth(`${SECRET}-other`, now).verifyLink(value, host, 'edge-c')).toBeUndefined();
    expect(auth.verifyLink(value, '10.0.0.3:8080', 'edge-c')).toBeUndefined();
    expect(new NodeAuth(SECRET, () => now() + 31_000).verifyLink(value, host, 'edge-c')).toBeUndefined();
  });

  it('refuses a link signed for another Host, or with any part of the value changed', () => {
    const auth = new NodeAuth(SECRET, now);
    const { value } = auth.signLink('edge-a', 'edge-b', host);
    expect(auth.verifyLink(value, '10.0.0.3:8080', 'edge-b')).toBeUndefined();
    const [v, from, to, stamp, nonce, hex] = value.split(' ') as [
      string,
      string,
      string,
      string,
      string,
      string,
    ];
    const otherNonce = `${nonce.slice(0, -1)}${nonce.endsWith('0') ? '1' : '0'}`;
    for (const changed of [
      [v, 'edge-x', to, stamp, nonce, hex],
      [v, from, 'edge-c', stamp, nonce, hex],
      [v, from, to, String(Number(stamp) + 1), nonce, hex],
      [v, from, to, stamp, otherNonce, hex],
      ['v1', from, to, stamp, nonce, hex],
      [v, from, to, stamp, nonce.toUpperCase(), hex],
      [v, from, to, stamp, hex],
    ]) {
      expect(auth.verifyLink(changed.join(' '), host, to)).toBeUndefined();
    }
    expect(new NodeAuth(`${SECRET}-other`, now).verifyLink(value, host, 'edge-b')).toBeUndefined();
  });

  it('names a valid v1 link upgrade as old (a peer from before v2), and refuses a forged one', () => {
    const auth = new NodeAuth(SECRET, now);
    const v1 = auth.sign({
      ...fields,
      method: 'GET',
      target: '/_tunnel2/node-link',
      host,
      peer: '',
      client: '',
      forwardedFor: '',
      proto: '',
      forwardedHost: '',
      prefix: '',
    });
    expect(auth.verifyLink(v1, host, 'edge-b')).toEqual({ kind: 'old', fromNode: 'edge-a' });
    expect(
      auth.verifyLink(`${v1.slice(0, -1)}${v1.endsWith('0') ? '1' : '0'}`, host, 'edge-b'),
    ).toBeUndefined();
  });

  it('checks the accepting node’s proof against the link’s own nodes and nonce', () => {
    const auth = new NodeAuth(SECRET, now);
    const { nonce } = auth.signLink('edge-a', 'edge-b', host);
    const proof = auth.proveLink('edge-a', 'edge-b', nonce);
    expect(auth.checkLinkProof(proof, 'edge-a', 'edge-b', nonce)).toBe(true);
    expect(auth.checkLinkProof(proof, 'edge-a', 'edge-c', nonce)).toBe(false);
    expect(
      auth.checkLinkProof(proof, 'edge-a', 'edge-b', auth.signLink('edge-a', 'edge-b', host).nonce),
    ).toBe(false);
    expect(new NodeAuth(`${SECRET}-other`, now).checkLinkProof(proof, 'edge-a', 'edge-b', nonce)).toBe(false);
    for (const bad of [undefined, 1, '', proof.slice(2), `${proof}00`, proof.toUpperCase()])
      expect(auth.checkLinkProof(bad, 'edge-a', 'edge-b', nonce)).toBe(false);
  });
});

describe('NodeAuth node records', () => {
  const url = 'http://10.0.0.2:8080';

  it('verifies a record as signed until its announcement would have expired (plus the skew), not after', () => {
    let t = 1_700_000_000_000;
    const auth = new NodeAuth(SECRET, () => t);
    const signature = auth.signNodeRecord('edge-b', url, 15_000);
    expect(signature).toMatch(/^v2 1700000000000 15000 [0-9a-f]{64}$/);
    expect(auth.verifyNodeRecord('edge-b', url, signature)).toBe(true);
    t += 15_000 + 30_000;
    expect(auth.verifyNodeRecord('edge-b', url, signature)).toBe(true);
    t += 1;
    expect(auth.verifyNodeRecord('edge-b', url, signature)).toBe(false);
  });

  it('refuses a record moved to another address or node, unsigned, or signed with another secret', () => {
    const now = (): number => 1_700_000_000_000;
    const auth = new NodeAuth(SECRET, now);
    const signature = auth.signNodeRecord('edge-b', url, 15_000);
    expect(auth.verifyNodeRecord('edge-b', 'http://10.6.6.6:8080', signature)).toBe(false);
    expect(auth.verifyNodeRecord('edge-c', url, signature)).toBe(false);
    expect(auth.verifyNodeRecord('edge-b', url, undefined)).toBe(false);
    expect(auth.verifyNodeRecord('edge-b', url, signature.replace(' 15000 ', ' 99999999 '))).toBe(false);
    const other = new NodeAuth(`${SECRET}-other`, now).signNodeRecord('edge-b', url, 15_000);
    expect(auth.verifyNodeRecord('edge-b', url, other)).toBe(false);
    for (const bad of ['', 'v2', `${signature} x`, signature.replace(/^v2/, 'v1'), signature.slice(0, -2)])
      expect(auth.verifyNodeRecord('edge-b', url, bad)).toBe(false);
  });

  it('refuses a record signed in the future beyond the skew', () => {
    let t = 1_700_000_000_000 + 30_001;
    const signature = new NodeAuth(SECRET, () => t).signNodeRecord('edge-b', url, 15_000);
    t = 1_700_000_000_000;
    expect(new NodeAuth(SECRET, () => t).verifyNodeRecord('edge-b', url, signature)).toBe(false);
  });
});
