import { decodeRequestHead, type MuxStream } from '@tunnel2/protocol';
import type { Logger } from 'pino';
import type { RequestReport } from './forward-options.js';

const REQUEST_ID = 'x-request-id';

/**
 * Logs the requests a stream carries with the edge's request id (the `x-request-id` header the edge adds),
 * so an operator can follow one request from the edge's log to the agent's. Requests are logged at debug,
 * failed ones at info. Attached only when the logger wants info or finer: by default (`warn`) the hot path
 * does no extra work at all.
 *
 * Call after the exchange has taken `stream.handler`; returns the report callback to hand on.
 */
export function traceStream(
  stream: MuxStream,
  logger: Logger,
  onReport: (report: RequestReport) => void,
): (report: RequestReport) => void {
  if (!logger.isLevelEnabled('info')) return onReport;
  let requestId: string | undefined;
  const handler = stream.handler;
  if (handler !== undefined) {
    const onHeaders = handler.onHeaders.bind(handler);
    // Only the first head is the request's; the wrapper removes itself so trailers go straight through.
    handler.onHeaders = (payload, endStream) => {
      handler.onHeaders = onHeaders;
      try {
        const head = decodeRequestHead(payload);
        for (let i = 0; i < head.headers.length; i += 2) {
          if (head.headers[i]!.toLowerCase() === REQUEST_ID) requestId = head.headers[i + 1];
        }
        logger.debug(
          { requestId, stream: stream.id, method: head.method, target: head.target },
          'request from edge',
        );
      } catch {
        // A malformed head is the exchange's to refuse; the trace just has nothing to say.
      }
      onHeaders(payload, endStream);
    };
  }
  return (report) => {
    if (report.error !== undefined) logger.info({ requestId, ...report }, 'request failed');
    else logger.debug({ requestId, ...report }, 'request done');
    onReport(report);
  };
}
