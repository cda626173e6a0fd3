import type { ClientHttp2Stream } from 'node:http2';
import type { ReplayRequest } from '@tunnel2/inspector';
import { isGrpcRequest } from '../grpc-form.js';
import type { Target } from '../target.js';
import { serverNameOf } from '../target-tls.js';
import type { H2Backend } from './h2-backend.js';
import { h2RequestHeaders } from './h2-fields.js';

/**
 * The inspector's way to replay a request to an HTTP/2 target (its ReplayTarget.h2Stream): a stream on the
 * agent's own pool of sessions, with the head an exchange would send (`:authority` from the forwarded
 * Host, `te: trailers` for a gRPC call), so a replay reaches the backend as the original request did. Undefined
 * once ALPN has chosen HTTP/1.1: the inspector then replays over HTTP/1.1 itself.
 */
export function h2ReplayStream(
  h2: H2Backend,
  target: Target,
): (request: ReplayRequest) => Promise<ClientHttp2Stream | undefined> {
  const https = target.origin.startsWith('https:');
  return async ({ method, path, headers }) => {
    if (h2.protocol === 'http/1.1') return undefined;
    const opened = await h2.open(https ? serverNameOf(headers) : '');
    if (opened === 'http/1.1') return undefined;
    let stream: ClientHttp2Stream;
    try {
      stream = opened.session.request(
        h2RequestHeaders(method, path, https ? 'https' : 'http', headers, isGrpcRequest(headers)),
        { endStream: false },
      );
    } catch (err) {
      // The session went away between the pool's choice and this request (GOAWAY, closed).
      opened.release();
      throw err;
    }
    stream.once('close', opened.release);
    return stream;
  };
}
