import type { Server as HttpServer } from 'node:http';
import { type AddressInfo, Server as NetServer, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { EdgeError, EdgeErrorCode } from '../errors.js';
import type { EdgeTlsOptions } from '../settings/edge-options.js';
import { CertificateStore, type ReloadCounts } from './certificate-store.js';
import { createHttpsRedirect } from './https-redirect.js';
import { connectionCapFromOpenFiles } from './open-files.js';
import type { PublicConnections } from './public-connections.js';
import { createPublicListener, type PlainChoice } from './public-listener.js';

/** What an edge says of its TLS (edge.tls). */
export interface EdgeTls {
  /** Certificate reloads since start, by outcome. */
  readonly reloads: Readonly<ReloadCounts>;
  /** When the certificate each pair serves now expires, by its tlsCert file. */
  expiries(): { cert: string; notAfter: Date }[];
  /** Reads the certificate files again (SIGHUP); a pair that fails keeps its previous certificate. */
  reload(reason: string): { changed: number; failed: number };
  /** The plain port redirecting to HTTPS (`httpPort`), once listening; undefined without one. */
  readonly httpPort: number | undefined;
}

export interface PublicPortOptions {
  /** Fastify's HTTP/1.1 server. */
  http1: HttpServer;
  connections: PublicConnections;
  tls: EdgeTlsOptions | undefined;
  /** The HTTP/2 handler (ALPN h2, and prior knowledge on a plain port with choosePlain). */
  http2?: (socket: Duplex) => void;
  choosePlain?: PlainChoice;
  domain: string;
  /**
   * The port clients reach HTTPS on, for the redirect's Location: an https publicUrl's (a container or a
   * load balancer mapping 443 to the port bound); absent, the port bound.
   */
  publicHttpsPort?: () => number | undefined;
  headersTimeoutMs: number;
  maxHeaderBytes: number;
  /** SO_REUSEPORT on the public and redirect ports, this process's own socket (a worker of `--workers N`). */
  reusePort?: boolean;
  logger: Logger;
}

/** The listen flags of a port bound with SO_REUSEPORT: exclusive, so a node:cluster worker binds it itself. */
export type ReusePortFlags = { reusePort: true; exclusive: true } | Record<string, never>;

/** SO_REUSEPORT's listen flags when asked for, else none (the single edge's listen is unchanged). */
export function reusePortFlags(reusePort: boolean | undefined): ReusePortFlags {
  return reusePort === true ? { reusePort: true, exclusive: true } : {};
}

/** Listens and resolves with the bound port, or rejects with the listen error (EADDRINUSE...). */
function listenOn(server: NetServer, port: number, host: string, flags: ReusePortFlags): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host, ...flags }, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/**
 * A TLS edge hands out https://<name>.<domain>/ and https://<domain>/session/<name>/: a certificate set that
 * names neither `*.<domain>` nor `<domain>` serves them one that browsers refuse. Said once at start, since
 * the handshakes themselves only fall back to the first pair.
 */
function warnOfUncoveredNames(certificates: CertificateStore, domain: string, logger: Logger): void {
  const missing = [`*.${domain}`, domain].filter((name) => !certificates.covers(name));
  if (missing.length === 0) return;
  const urls = missing.map((name) => (name === domain ? `https://${domain}/` : `https://<name>.${domain}/`));
  logger.warn(
    { domain, missing },
    `no TLS certificate names ${missing.join(' nor ')}: browsers refuse the certificate served at ${urls.join(' and ')} (add a pair naming it)`,
  );
}

/**
 * The edge's public port as a whole: the listener that accepts (public-listener.ts), the certificates it
 * serves and their reloads, the optional redirect port, the connection cap, and the order in which they
 * start and stop. build-edge.ts decides what is served; this decides how connections arrive.
 */
export class PublicPort {
  readonly #options: PublicPortOptions;
  readonly #certificates: CertificateStore | undefined;
  readonly #listener: ReturnType<typeof createPublicListener>;
  readonly #redirect: HttpServer | undefined;
  #port = 0;
  #redirectPort: number | undefined;
  /** Undefined when the port is plain HTTP. */
  readonly tls: EdgeTls | undefined;

  /** Reads the certificates: throws the CertificateProblem naming the setting and the file of a bad pair. */
  constructor(options: PublicPortOptions) {
    this.#options = options;
    const { tls, connections, logger } = options;
    this.#certificates =
      tls === undefined ? undefined : new CertificateStore({ pairs: tls.pairs, logger, pollMs: tls.pollMs });
    const certificates = this.#certificates;
    if (certificates !== undefined) warnOfUncoveredNames(certificates, options.domain, logger);
    this.#listener = createPublicListener({
      http1: options.http1,
      admit: (socket) => connections.admit(socket),
      logger,
      ...(options.http2 === undefined ? {} : { http2: options.http2 }),
      ...(options.choosePlain === undefined ? {} : { choosePlain: options.choosePlain }),
      ...(certificates === undefined
        ? {}
        : {
            tls: { certificates, handshakeTimeoutMs: tls?.handshakeTimeoutMs ?? options.headersTimeoutMs },
          }),
    });
    // Past maxConnections (set at listen from the open-file limit) Node closes a new connection itself.
    this.#listener.server.on('drop', () => connections.droppedAtOpenFiles());
    this.#redirect =
      tls?.httpPort === undefined
        ? undefined
        : createHttpsRedirect({
            httpsPort: () => options.publicHttpsPort?.() ?? this.#port,
            domain: options.domain,
            acmeDir: tls.acmeDir,
            headersTimeoutMs: options.headersTimeoutMs,
            maxHeaderBytes: options.maxHeaderBytes,
            logger,
          });
    // The redirect port is public too: its connections count against their address with the TLS port's,
    // from accept (after Node's own listener, as on the plain port), so it cannot hold what the cap denies.
    this.#redirect?.on('connection', (socket: Socket) => {
      if (!connections.admit(socket)) socket.destroy();
    });
    const redirectPort = (): number | undefined => this.#redirectPort;
    this.tls =
      certificates === undefined
        ? undefined
        : {
            reloads: certificates.reloads,
            expiries: () => certificates.expiries(),
            reload: (reason) => certificates.reload(reason),
            get httpPort() {
              return redirectPort();
            },
          };
  }

  /** How the public and redirect ports are bound (Fastify's own listen takes them too). */
  get listenFlags(): ReusePortFlags {
    return reusePortFlags(this.#options.reusePort);
  }

  /** `https` when the port serves TLS. */
  get scheme(): 'http' | 'https' {
    return this.#certificates === undefined ? 'http' : 'https';
  }

  /** The server that accepts the port's connections. */
  get server(): NetServer {
    return this.#listener.server;
  }

  get listening(): boolean {
    return this.#listener.server.listening;
  }

  /**
   * Listens on the public port (with `listenHttp1` when the HTTP/1.1 server accepts itself: Fastify's own
   * listen), then on the redirect port; starts watching the certificates. Resolves with the bound port.
   */
  async listen(
    port: number,
    host: string,
    listenHttp1: () => Promise<unknown>,
    ready: () => Promise<unknown>,
  ): Promise<number> {
    const server = this.#listener.server;
    if (server === this.#options.http1) {
      await listenHttp1();
    } else {
      // Fastify's server is fed connections by the one that listens: it is made ready, not listened.
      await ready();
      await listenOn(server, port, host, this.listenFlags);
    }
    this.#port = (server.address() as AddressInfo).port;
    if (this.#redirect !== undefined) {
      const httpPort = this.#options.tls?.httpPort ?? 0;
      try {
        this.#redirectPort = await listenOn(this.#redirect, httpPort, host, this.listenFlags);
      } catch (err) {
        throw new EdgeError(
          EdgeErrorCode.INVALID_CONFIG,
          `invalid setting httpPort=${httpPort}: cannot listen on ${host}:${httpPort} (${(err as NodeJS.ErrnoException).code ?? String(err)})`,
          { cause: err },
        );
      }
    }
    this.#certificates?.watch();
    return this.#port;
  }

  /** The connection cap below the open-file limit, counted once what the edge opens at start is open. */
  capConnections(): void {
    const server = this.#listener.server;
    const cap = connectionCapFromOpenFiles();
    if (cap !== undefined) server.maxConnections = cap;
    // A failed accept is the server's 'error' (EMFILE when libuv cannot close the connection for us,
    // ENFILE at the system's limit): unheard, it would end the process.
    server.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EMFILE' || err.code === 'ENFILE') this.#options.connections.droppedAtOpenFiles();
      else this.#options.logger.warn({ err }, 'public listener error');
    });
  }

  /**
   * No new connection from here (the drain). Not http.Server's close: since Node 19 it also closes every
   * idle keep-alive connection at once (build-edge.ts's close() says why that is avoided).
   */
  stopAccepting(): void {
    const server = this.#listener.server;
    if (server.listening) NetServer.prototype.close.call(server);
    if (this.#redirect?.listening) this.#redirect.close();
    this.#certificates?.stop();
  }

  /** The last step of a stop: every connection still open, a TLS handshake's or the redirect port's too. */
  destroyAll(): void {
    this.#redirect?.closeAllConnections();
    this.#listener.destroyAll();
  }

  /** After Fastify's close: a fed HTTP/1.1 server (never listening) is left alone by Fastify; its checks end here. */
  closeFed(): void {
    if (this.#listener.server !== this.#options.http1) this.#options.http1.close();
  }
}
