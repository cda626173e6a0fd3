import type { IncomingMessage, ServerResponse } from 'node:http';
import { type ResponseHead, withoutHopByHop } from '@tunnel2/protocol';
import { headersAreSafe, serializeResponseHead } from './raw-http.js';

/**
 * Relays an interim (1xx) response head from the backend to the public client before the final one.
 * `100 Continue` goes through `writeContinue`, `103 Early Hints` through `writeEarlyHints` (both queue
 * behind a pipelined response still being written); any other 1xx is written raw onto the client's socket
 * once that socket belongs to this response. Interim responses are advisory (RFC 9110 §15.2): when one
 * cannot be written safely it is dropped, and the final response still follows.
 */
export function writeInformational(req: IncomingMessage, res: ServerResponse, head: ResponseHead): void {
  // A server must not send 1xx to an HTTP/1.0 client (RFC 9110 §15.2); the head is gone once final.
  if (res.headersSent || (req.httpVersionMajor === 1 && req.httpVersionMinor === 0)) return;
  // 101 is final for an upgrade and never interim: relaying it would tell the client the protocol changed.
  if (head.status === 101) return;
  // The agent is not trusted: a CR or LF in a field would let it smuggle a response.
  if (!headersAreSafe(head.headers) || /[\r\n]/.test(head.statusMessage)) return;
  const headers = withoutHopByHop(head.headers);
  if (head.status === 100) {
    res.writeContinue();
    return;
  }
  if (head.status === 103) {
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
  const socket = res.socket;
  if (socket === null || socket.destroyed) return; // a pipelined response not yet at the head of the line
  socket.write(serializeResponseHead(head.status, head.statusMessage, headers));
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
