import { describe, expect, it } from 'vitest';
import { isValidSessionName } from '../src/agents/session-name.js';
import { hostnameOf, resolveIngressRoute } from '../src/public/ingress-route.js';

describe('resolveIngressRoute', () => {
  it('routes <name>.<domain> by host, keeping the whole target', () => {
    expect(resolveIngressRoute('app.localhost:8080', '/a/b?c=1', 'localhost')).toEqual({
      name: 'app',
      target: '/a/b?c=1',
      via: 'host',
    });
    expect(resolveIngressRoute('APP.Example.COM', '/', 'example.com')).toEqual({
      name: 'app',
      target: '/',
      via: 'host',
    });
  });

  it('routes /session/<name>/... by path and strips the prefix', () => {
    expect(resolveIngressRoute('localhost:8080', '/session/app/x/y?z=1', 'localhost')).toEqual({
      name: 'app',
      target: '/x/y?z=1',
      via: 'path',
    });
    expect(resolveIngressRoute('localhost', '/session/app', 'localhost')?.target).toBe('/');
    expect(resolveIngressRoute('localhost', '/session/app?q', 'localhost')?.target).toBe('/?q');
  });

  it('host routing wins over a /session/ path', () => {
    expect(resolveIngressRoute('app.localhost', '/session/other/x', 'localhost')).toMatchObject({
      name: 'app',
      target: '/session/other/x',
    });
  });

  it('leaves the edge its own requests', () => {
    expect(resolveIngressRoute('localhost:8080', '/', 'localhost')).toBeUndefined();
    expect(resolveIngressRoute('evil.com', '/', 'localhost')).toBeUndefined();
    expect(resolveIngressRoute('notlocalhost', '/', 'localhost')).toBeUndefined();
    expect(resolveIngressRoute('a.b.localhost', '/', 'localhost')).toBeUndefined();
    expect(resolveIngressRoute(undefined, '/session/', 'localhost')).toBeUndefined();
  });

  it('parses hosts with ports and IPv6 literals', () => {
    expect(hostnameOf('[::1]:8080')).toBe('[::1]');
    expect(hostnameOf('Example.com:80')).toBe('example.com');
    expect(hostnameOf('')).toBeUndefined();
  });

  it('accepts DNS labels only as session names', () => {
    for (const ok of ['a', 'app', 'my-app-1', 'x'.repeat(63)]) expect(isValidSessionName(ok)).toBe(true);
    for (const bad of ['', '-a', 'a-', 'A', 'a_b', 'a.b', 'x'.repeat(64)])
      expect(isValidSessionName(bad)).toBe(false);
  });
});

describe('absolute-form request targets', () => {
  it('route by their authority, ignoring Host, and carry only the path on', () => {
    expect(resolveIngressRoute('evil.example', 'http://app.localhost:8080/a?b=1', 'localhost')).toEqual({
      name: 'app',
      target: '/a?b=1',
      via: 'host',
    });
    expect(resolveIngressRoute('app.localhost', 'http://evil.example/x', 'localhost')).toBeUndefined();
    expect(resolveIngressRoute('app.localhost', 'ftp://app.localhost/x', 'localhost')).toBeUndefined();
    expect(resolveIngressRoute('app.localhost', '*', 'localhost')).toBeUndefined();
  });
});
