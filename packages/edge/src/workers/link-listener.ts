import type { Server as HttpServer } from 'node:http';
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';

/**
 * A worker's own address for what other workers send it: node links, the HTTP hop and takeover notices.
 * The public port is shared (a connection lands on any worker), so a worker is reached individually here:
 * its connections are fed to the edge's HTTP/1.1 server, which serves them as it serves the public port's.
 * Listened with `exclusive` so that node:cluster does not share it among the workers.
 */
export class LinkListener {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #target: HttpServer | undefined;
  #port = 0;

  constructor() {
    this.#server = createServer((socket) => {
      // Before the edge exists nobody can know this address (it is announced by the edge's start).
      if (this.#target === undefined) {
        socket.destroy();
        return;
      }
      this.#sockets.add(socket);
      socket.once('close', () => this.#sockets.delete(socket));
      this.#target.emit('connection', socket);
    });
  }

  /** Listens on `host`, a port of its own. */
  listen(host: string): Promise<number> {
    return new Promise((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen({ host, port: 0, exclusive: true }, () => {
        this.#server.off('error', reject);
        this.#port = (this.#server.address() as AddressInfo).port;
        resolve(this.#port);
      });
    });
  }

  get port(): number {
    return this.#port;
  }

  /** From now on connections are the edge's HTTP/1.1 server's. */
  feed(target: HttpServer): void {
    this.#target = target;
  }

  /** Stops accepting; the connections fed are the edge's to close (its drain closes them). */
  close(): void {
    this.#server.close();
    for (const socket of this.#sockets) socket.destroy();
  }
}
