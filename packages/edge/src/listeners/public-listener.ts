import type { Server as HttpServer } from 'node:http';
import { Server as NetServer, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import type { Logger } from 'pino';
import { rejectUpgrade } from '../answers/error-response.js';
import { EdgeErrorCode } from '../errors.js';
import type { CertificateStore } from './certificate-store.js';

/** How a plain connection is served: the HTTP/1.1 server, or the HTTP/2 one (a client with prior knowledge). */
export type PlainChoice = (
  socket: Socket,
  take: (protocol: 'h2' | 'http/1.1', socket: Duplex) => void,
) => void;

export interface PublicListenerOptions {
  /** The HTTP/1.1 server (Fastify's): fed the connections that speak HTTP/1.x, never listening itself but plain. */
  http1: HttpServer;
  /** A new connection, before anything is read from it: false closes it (per-address cap). */
  admit: (socket: Socket) => boolean;
  /** TLS on the public port: certificates chosen by SNI, ALPN `h2` (with `http2`) and `http/1.1`. */
  tls?: { certificates: CertificateStore; handshakeTimeoutMs: number };
  /** Serves an HTTP/2 connection (after ALPN `h2`, or `choosePlain`'s answer); without it ALPN offers http/1.1 only. */
  http2?: (socket: Duplex) => void;
  /** On the plain port, with `http2`: which server takes a connection (the HTTP/2 preface sniffed). */
  choosePlain?: PlainChoice;
  logger: Logger;
}

/**
 * The public port. It is one of three:
 *  - plain and HTTP/1.1 only: the HTTP/1.1 server itself listens (exactly the edge before TLS);
 *  - plain with an HTTP/2 handler: a net.Server takes each connection and `choosePlain` hands it on;
 *  - TLS: a tls.Server whose secure sockets go to the HTTP/2 handler when ALPN chose `h2`, else to the
 *    HTTP/1.1 server (ALPN `http/1.1`, or a client that offered none).
 * In every case `server` is the one that accepts: its maxConnections, 'drop', close() and address() are the
 * port's. A connection is admitted (counted per address) when accepted, before a TLS handshake, so clients
 * that never finish one count against their address like any other, and a handshake has handshakeTimeoutMs.
 */
export interface PublicListener {
  readonly server: NetServer;
  /** Closes every connection the port accepted (the last step of a stop); handshakes still running too. */
  destroyAll(): void;
}

export function createPublicListener(options: PublicListenerOptions): PublicListener {
  const { http1, admit, tls, http2, logger } = options;
  const toHttp1 = (socket: Duplex): void => {
    http1.emit('connection', socket);
  };
  const take = (protocol: 'h2' | 'http/1.1', socket: Duplex): void => {
    if (protocol === 'h2' && http2 !== undefined) http2(socket);
    else toHttp1(socket);
  };
  if (tls === undefined && (http2 === undefined || options.choosePlain === undefined)) {
    // After Node's own connection listener, as the edge always did: a refused connection is closed unread.
    http1.on('connection', (socket: Socket) => {
      if (!admit(socket)) socket.destroy();
    });
    // Its connections are the HTTP/1.1 server's own, closed by closeAllConnections.
    return { server: http1, destroyAll: () => {} };
  }
  let server: NetServer;
  if (tls === undefined) {
    const choosePlain = options.choosePlain!;
    // A connection admit refused is already destroyed: nothing to choose for it.
    server = new NetServer({ allowHalfOpen: true, noDelay: true }, (socket) => {
      if (!socket.destroyed) choosePlain(socket, take);
    });
  } else {
    const certificates = tls.certificates;
    const tlsServer = createTlsServer({
      ...certificates.defaultPem,
      SNICallback: (servername, callback) => callback(null, certificates.contextFor(servername)),
      ALPNProtocols: http2 === undefined ? ['http/1.1'] : ['h2', 'http/1.1'],
      handshakeTimeout: tls.handshakeTimeoutMs,
      noDelay: true,
    });
    // A client without SNI gets the default context: it follows the first pair's reloads.
    certificates.onChange(() => tlsServer.setSecureContext({ ...certificates.defaultPem }));
    tlsServer.on('secureConnection', (socket: TLSSocket) =>
      take(socket.alpnProtocol === 'h2' ? 'h2' : 'http/1.1', socket),
    );
    // A failed or timed-out handshake (a scanner's noise, not a warning). With a listener here Node leaves
    // the socket open: a client that never sends its hello would hold its connection for good.
    tlsServer.on('tlsClientError', (err: NodeJS.ErrnoException, socket: TLSSocket) => {
      // Plain HTTP on this port (http:// typed for https://, an agent given http://): OpenSSL saw a request
      // line where a record belongs and nothing was written yet. Answered in plain text on the TCP socket,
      // as nginx does, rather than a reset the client cannot explain.
      const raw = (socket as unknown as { _parent?: unknown })._parent;
      if (err.code === 'ERR_SSL_HTTP_REQUEST' && raw instanceof Socket && raw.writable) {
        rejectUpgrade(raw, {
          code: EdgeErrorCode.BAD_REQUEST,
          message: 'this port speaks HTTPS: the request came as plain HTTP (use https://)',
        });
        return;
      }
      socket.destroy();
      logger.debug(
        { err: { code: err.code, message: err.message }, remote: socket.remoteAddress },
        'TLS handshake failed',
      );
    });
    server = tlsServer;
  }
  const accepted = new Set<Socket>();
  // 'connection' is the raw TCP socket, before a handshake or a byte is read.
  server.prependListener('connection', (socket: Socket) => {
    if (!admit(socket)) {
      socket.destroy();
      return;
    }
    accepted.add(socket);
    socket.once('close', () => accepted.delete(socket));
  });
  // The HTTP/1.1 server never listens: its slow-client checks (headersTimeout, requestTimeout) start on
  // 'listening', which is said for it when the port listens.
  server.on('listening', () => http1.emit('listening'));
  return {
    server,
    destroyAll() {
      for (const socket of accepted) socket.destroy();
    },
  };
}
