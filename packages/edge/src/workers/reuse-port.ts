import { type AddressInfo, createServer, type Server } from 'node:net';
import { EdgeError, EdgeErrorCode } from '../errors.js';
import type { EdgeSettings } from '../settings/edge-config.js';

/**
 * Where SO_REUSEPORT balances a port's connections over the sockets bound to it (Node's `reusePort`:
 * Linux 3.9+, FreeBSD 12+). macOS and the other BSDs accept the flag but hand every connection to one
 * socket; Windows has none: there the workers keep node:cluster's round-robin (the primary accepts).
 */
export function reusePortBalances(platform: NodeJS.Platform = process.platform): boolean {
  return platform === 'linux' || platform === 'freebsd';
}

/** Binds `port` on `host` alone (no SO_REUSEPORT) and resolves with the server, listening. */
function probe(setting: string, host: string, port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        new EdgeError(
          EdgeErrorCode.INVALID_CONFIG,
          `invalid setting ${setting}=${port}: cannot listen on ${host}:${port} (${err.code ?? String(err)})`,
          { cause: err },
        ),
      ),
    );
    server.listen({ port, host, exclusive: true }, () => resolve(server));
  });
}

const portOf = (server: Server): number => (server.address() as AddressInfo).port;
const closed = (server: Server): Promise<void> => new Promise((resolve) => server.close(() => resolve()));

/**
 * Before workers bind the public and redirect ports with SO_REUSEPORT, the primary binds each once alone:
 * port 0 becomes the one port every worker then binds (each binding 0 itself would get its own), and a
 * port some process holds already (another edge of the same user included, which SO_REUSEPORT would
 * otherwise let the workers join and split the traffic with) fails the start as a single edge's does.
 * Both probes are held until both are bound: with `port` and `httpPort` 0, the kernel could otherwise
 * hand the second the port the first just gave back, and the workers' SO_REUSEPORT binds of both would
 * succeed on that one port. The port is free between this probe and the first worker's bind: a process
 * taking it then fails that worker's listen, and the start, with the same message.
 */
export async function reservePorts(settings: EdgeSettings): Promise<EdgeSettings> {
  const held: Server[] = [];
  try {
    const main = await probe('port', settings.host, settings.port);
    held.push(main);
    const tls = settings.tlsCert.length > 0;
    const redirect =
      tls && settings.httpPort !== undefined
        ? await probe('httpPort', settings.host, settings.httpPort)
        : undefined;
    if (redirect !== undefined) held.push(redirect);
    return {
      ...settings,
      port: portOf(main),
      httpPort: redirect === undefined ? settings.httpPort : portOf(redirect),
    };
  } finally {
    await Promise.all(held.map(closed));
  }
}
