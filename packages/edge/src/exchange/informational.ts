import { type RawHeaders, withoutHopByHop } from '@tunnel2/protocol';
import type { PublicMessage, PublicResponse } from './public-message.js';
import { serializeResponseHead } from './raw-http.js';

// The bound on interim heads per response is shared with the agent's node:http path (protocol constants.ts).
export { MAX_INTERIM_HEADS } from '@tunnel2/protocol';

/**
 * Relays an interim (1xx) response head from the backend to the public client before the final one.
 * The head has passed `checkResponseHead` (a token name, no CR/LF/NUL anywhere, not a 101).
 * `100 Continue` goes through `writeContinue`, `103 Early Hints` through `writeEarlyHints` (both queue
 * behind a pipelined response still being written); any other 1xx is written raw onto the client's socket
 * once that socket belongs to this response. Interim responses are advisory (RFC 9110 §15.2): when one
 * cannot be written safely, or the client is not reading what was already written, it is dropped, and the
 * final response still follows.
 */
export function writeInformational(
  req: PublicMessage,
  res: PublicResponse,
  status: number,
  statusMessage: string,
  fields: RawHeaders,
): void {
  // A server must not send 1xx to an HTTP/1.0 client (RFC 9110 §15.2); the head is gone once final.
  if (res.headersSent || (req.httpVersionMajor === 1 && req.httpVersionMinor === 0)) return;
  if (res.sendInterim !== undefined) {
    // HTTP/2: each interim head is a HEADERS frame on this stream, framed by nghttp2 (no raw bytes).
    res.sendInterim(status, withoutHopByHop(fields));
    return;
  }
  const socket = res.socket;
  // A client that has not taken the bytes already written gets no more advisory ones: memory stays flat.
  if (socket !== null && socket.writableLength > 0) return;
  const headers = withoutHopByHop(fields);
  if (status === 100) {
    res.writeContinue();
    return;
  }
  if (status === 103) {
    const hints = earlyHints(headers);
    if (hints.link !== undefined) {
      try {
        res.writeEarlyHints(hints);
        return;
      } catch {
        // Node refuses Link values outside its narrow grammar; the raw write below keeps them as sent.
      }
    }
  }
  if (socket === null || socket.destroyed) return; // a pipelined response not yet at the head of the line
  socket.write(serializeResponseHead(status, statusMessage, headers));
}

/** Early hints as Node's writeEarlyHints wants them: lowercased names to a value or a list of values. */
function earlyHints(raw: string[]): Record<string, string | string[]> {
  const hints: Record<string, string | string[]> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const existing = hints[name];
    hints[name] =
      existing === undefined
        ? raw[i + 1]!
        : [...(Array.isArray(existing) ? existing : [existing]), raw[i + 1]!];
  }
  return hints;
}
