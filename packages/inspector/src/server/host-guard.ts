// Not an `import`: an ESM import of node:net reads every export, and its `BlockList` and `SocketAddress`
// getters load both, which the agent never uses (bench/README.md, issue #34: the workspace agent's idle RSS).
const { isIP } = process.getBuiltinModule('node:net');

/**
 * The DNS-rebinding guard: a page on another site can make a browser send requests to this port under its
 * own name, so only the address the server listens on (and `localhost`) are answered, on its port. When it
 * listens on every interface, any IP literal is accepted too (names still are not).
 */
export function createHostGuard(listenHost: string, port: number): (host: string | undefined) => boolean {
  const bare = listenHost.replace(/^\[|\]$/g, '').toLowerCase();
  const wildcard = bare === '0.0.0.0' || bare === '::';
  return (host) => {
    if (host === undefined) return false;
    const match = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(host.trim().toLowerCase());
    if (match === null) return false;
    const hostname = match[1]!.replace(/^\[|\]$/g, '');
    const givenPort = match[2] === undefined ? 80 : Number(match[2]);
    if (givenPort !== port) return false;
    if (hostname === 'localhost' || hostname === bare) return true;
    return wildcard && isIP(hostname) !== 0;
  };
}
