import { createServer, type Server, type Socket } from 'node:net';
import type { Logger } from 'pino';

export interface PortListenerOptions {
  host: string;
  /** SO_REUSEPORT: each worker of `--workers N` binds the range itself, the kernel spreads connections. */
  reusePort: boolean;
  logger: Logger;
  onConnection(socket: Socket): void;
}

/** Listens on one public TCP port of a cluster node's range; undefined when the host refuses it. */
export function listenPort(port: number, options: PortListenerOptions): Promise<Server | undefined> {
  const { logger } = options;
  // allowHalfOpen: a client's FIN ends only its direction; the answer still flows (half-close).
  const server = createServer({ allowHalfOpen: true, noDelay: true });
  server.on('connection', options.onConnection);
  return new Promise((resolve) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      logger.debug({ err, port }, 'TCP port not available');
      resolve(undefined);
    };
    server.once('error', onError);
    // Not exclusive: in a worker of `--workers N` the workers share each port (node:cluster hands its
    // connections out in turn, or with reusePort each binds its own socket and the kernel spreads them;
    // either way carried to the holder like another node's); elsewhere it changes nothing.
    // exclusive with reusePort: a node:cluster worker binds its own socket instead of asking the primary.
    const flags = options.reusePort ? { reusePort: true, exclusive: true } : {};
    server.listen({ port, host: options.host, ...flags }, () => {
      server.off('error', onError);
      server.on('error', (err) => logger.warn({ err, port }, 'TCP listener failed'));
      resolve(server);
    });
  });
}
