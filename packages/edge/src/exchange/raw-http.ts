import type { RawHeaders } from '@tunnel2/protocol';
import type { PublicMessage } from './public-message.js';

// Not an `import`: an ESM import of node:http also loads Node's bundled undici (README.md, "Development").
const { STATUS_CODES } = process.getBuiltinModule('node:http');

/**
 * Serializes a response head for a raw socket (after an upgrade the edge owns the bytes itself). The head
 * must have passed `checkResponseHead`: nothing here escapes or checks a field.
 */
export function serializeResponseHead(status: number, statusMessage: string, headers: RawHeaders): Buffer {
  let head = `HTTP/1.1 ${status} ${statusMessage || STATUS_CODES[status] || 'Unknown'}\r\n`;
  for (let i = 0; i < headers.length; i += 2) head += `${headers[i]}: ${headers[i + 1]}\r\n`;
  return Buffer.from(`${head}\r\n`, 'latin1');
}

/** A request has a body when it declares a non-zero length or uses a transfer coding (RFC 9112 §6.3). */
export function requestHasBody(req: PublicMessage): boolean {
  if (req.bodyFollows !== undefined) return req.bodyFollows;
  const length = req.headers['content-length'];
  if (length !== undefined) return length !== '0';
  return req.headers['transfer-encoding'] !== undefined;
}

/** A flat raw field list (name, value, name, value…) as the pairs `addTrailers` takes. */
export function pairs(raw: readonly string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i < raw.length; i += 2) out.push([raw[i]!, raw[i + 1]!]);
  return out;
}

/**
 * Methods a client may expect to be sent twice without harm (RFC 9110 §9.2.2): only these are sent
 * again after a node that may already have given them to the backend failed to answer.
 */
export function isIdempotent(method: string | undefined): boolean {
  switch (method) {
    case 'GET':
    case 'HEAD':
    case 'OPTIONS':
    case 'TRACE':
    case 'PUT':
    case 'DELETE':
      return true;
    default:
      return false;
  }
}
