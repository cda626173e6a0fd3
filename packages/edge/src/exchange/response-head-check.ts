import type { RawHeaders, ResponseHead } from '@tunnel2/protocol';
import { quoteForEcho } from '../answers/echo.js';

/**
 * The edge checks the agent's response head the way a proxy checks an origin's (HAProxy, Envoy): the agent
 * is not trusted, and whatever the edge writes to a public connection must frame exactly one response.
 * Pure: no I/O, one pass over the fields; a head that passes can be handed to Node's `writeHead` as is.
 */

/** What the request asked for that decides which heads are acceptable. */
export interface HeadRequest {
  method: string;
  /** The public request asked for an upgrade: `101 Switching Protocols` is then a final answer. */
  upgrade: boolean;
}

export interface AcceptedHead {
  ok: true;
  /** `interim`: 1xx other than a 101 to an upgrade; `switch`: that 101; `final`: everything else. */
  kind: 'interim' | 'switch' | 'final';
  /**
   * Body bytes the response may carry: its declared length, 0 when it must have none (HEAD, 1xx, 204, 304),
   * `Infinity` when undeclared (Node then chunks it, or delimits it by closing for an HTTP/1.0 client).
   */
  bodyLimit: number;
  /** The head's fields, with a repeated but consistent Content-Length folded into one field. */
  headers: RawHeaders;
}

export interface RejectedHead {
  ok: false;
  /** Names what was wrong, with anything echoed from the agent escaped and bounded. */
  problem: string;
}

export type HeadCheck = AcceptedHead | RejectedHead;

/** RFC 9110 §5.6.2 token: the only characters a field name may have. */
const token = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** RFC 9110 §5.5 field value and RFC 9112 §4 reason phrase: HTAB, SP, VCHAR, obs-text. No CR, LF, NUL or other CTL. */
const badText = /[^\t\x20-\x7e\x80-\xff]/;
/** RFC 9110 §8.6: Content-Length = 1*DIGIT. */
const digits = /^[0-9]+$/;
/** How much of an offending value is echoed back in the 502's body. */
const ECHOED_CHARS = 64;

export function checkResponseHead(head: ResponseHead, request: HeadRequest): HeadCheck {
  const { status } = head;
  if (!Number.isInteger(status) || status < 100 || status > 999)
    return reject(`status ${status} is outside 100-999`);
  if (badText.test(head.statusMessage))
    return reject(
      `reason phrase ${quoteForEcho(head.statusMessage, ECHOED_CHARS)} has a forbidden character`,
    );
  const switching = status === 101;
  if (switching && !request.upgrade) return reject('status 101 answers a request that asked for no upgrade');
  const interim = status < 200 && !switching;

  const fields = head.headers;
  let length: number | undefined;
  /** The length needs rewriting as one plain field: it was repeated, listed or padded. */
  let fold = false;
  let lengthFields = 0;
  let codings: string | undefined;
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    const value = fields[i + 1]!;
    if (!token.test(name)) return reject(`header name ${quoteForEcho(name, ECHOED_CHARS)} is not a token`);
    if (badText.test(value))
      return reject(`header ${quoteForEcho(name, ECHOED_CHARS)} has a forbidden character in its value`);
    if (name.length === 14 && name.toLowerCase() === 'content-length') {
      if (++lengthFields > 1 || value.includes(',') || value.trim() !== value) fold = true;
      // A list of identical values is one length (RFC 9110 §8.6); anything else is ambiguous framing.
      for (const part of value.split(',')) {
        const text = part.trim();
        if (!digits.test(text))
          return reject(`Content-Length ${quoteForEcho(value, ECHOED_CHARS)} is not a decimal length`);
        const n = Number(text);
        if (n > Number.MAX_SAFE_INTEGER)
          return reject(`Content-Length ${quoteForEcho(value, ECHOED_CHARS)} is too large`);
        if (length !== undefined && n !== length)
          return reject(`Content-Length has conflicting values (${length} and ${n})`);
        length = n;
      }
    } else if (name.length === 17 && name.toLowerCase() === 'transfer-encoding') {
      codings = codings === undefined ? value : `${codings}, ${value}`;
    }
  }

  if (codings !== undefined) {
    // Both framings at once is the classic smuggling shape (RFC 9112 §6.3 says to treat it as an error).
    if (length !== undefined) return reject('both Transfer-Encoding and Content-Length are present');
    if (interim || status === 204) return reject(`status ${status} must not have a Transfer-Encoding`);
    // The agent sends the body already decoded; chunked is the only coding the edge can drop and redo.
    // Any other final coding would make the body close-delimited gzip (or such) the edge cannot frame.
    const last = codings.split(',').pop()!.trim().toLowerCase();
    if (last !== 'chunked')
      return reject(`Transfer-Encoding ${quoteForEcho(codings, ECHOED_CHARS)} does not end in chunked`);
  }
  if ((interim || status === 204) && length !== undefined && length !== 0)
    return reject(`status ${status} must not declare a Content-Length of ${length}`);

  const bodyless = interim || status === 204 || status === 304 || request.method === 'HEAD';
  return {
    ok: true,
    kind: interim ? 'interim' : switching ? 'switch' : 'final',
    bodyLimit: switching ? Number.POSITIVE_INFINITY : bodyless ? 0 : (length ?? Number.POSITIVE_INFINITY),
    headers: fold ? folded(fields, length!) : fields,
  };
}

/**
 * True when every field has a token name and a value without CR, LF, NUL or other CTL: what a trailer
 * section must satisfy before Node's `addTrailers` sees it (it throws on anything else).
 */
export function fieldsAreValid(fields: RawHeaders): boolean {
  for (let i = 0; i < fields.length; i += 2)
    if (!token.test(fields[i]!) || badText.test(fields[i + 1]!)) return false;
  return true;
}

/** The fields with every Content-Length replaced by one, where the first one was. */
function folded(fields: RawHeaders, length: number): RawHeaders {
  const out: RawHeaders = [];
  let placed = false;
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    if (name.length === 14 && name.toLowerCase() === 'content-length') {
      if (placed) continue;
      placed = true;
      out.push(name, String(length));
    } else out.push(name, fields[i + 1]!);
  }
  return out;
}

function reject(problem: string): RejectedHead {
  return { ok: false, problem };
}
