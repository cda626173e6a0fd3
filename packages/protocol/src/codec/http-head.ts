import { ErrorCode } from '../constants.js';
import { ProtocolError, ProtocolErrorCode } from '../errors.js';

/**
 * Headers as a flat list of name/value pairs in wire order, like Node's `rawHeaders`:
 * [name0, value0, name1, value1, ...]. Keeps case, order and repeated names (Set-Cookie).
 */
export type RawHeaders = string[];

export interface RequestHead {
  method: string;
  /** The request target as received (origin-form path and query, percent-encoding untouched). */
  target: string;
  headers: RawHeaders;
}

export interface ResponseHead {
  status: number;
  statusMessage: string;
  headers: RawHeaders;
}

// Strings are latin1 on the wire: HTTP/1.1 field bytes map 1:1 to latin1 code units, which is what
// Node's http parser produces, so every byte round-trips.
const ENC = 'latin1';

function malformed(message: string): ProtocolError {
  return new ProtocolError(ProtocolErrorCode.MALFORMED_HEAD, ErrorCode.PROTOCOL_ERROR, message);
}

function tooLarge(what: string, size: number, limit: number): ProtocolError {
  return new ProtocolError(
    ProtocolErrorCode.HEAD_TOO_LARGE,
    ErrorCode.HEADERS_TOO_LARGE,
    `${what} of ${size} bytes exceeds the limit of ${limit}`,
  );
}

function headersSize(headers: RawHeaders): number {
  if (headers.length % 2 !== 0) throw malformed('raw headers must come in name/value pairs');
  if (headers.length / 2 > 0xff_ff) throw tooLarge('header count', headers.length / 2, 0xff_ff);
  let size = 2;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    const value = headers[i + 1]!;
    if (name.length > 0xff_ff) throw tooLarge('header name', name.length, 0xff_ff);
    if (value.length > 0xff_ff) throw tooLarge('header value', value.length, 0xff_ff);
    size += 4 + name.length + value.length;
  }
  return size;
}

/**
 * Writes a latin1 string and returns its length. Header fields are short, and for short strings a plain
 * loop beats a call into native code (the native write was ~8 % of the agent's CPU under load).
 */
function writeLatin1(out: Buffer, value: string, offset: number): number {
  const length = value.length;
  if (length > 48) return out.write(value, offset, ENC);
  for (let i = 0; i < length; i++) out[offset + i] = value.charCodeAt(i) & 0xff;
  return length;
}

/**
 * Writes a u16 the caller has bounded (`headersSize`, the target's and status's checks). By hand: Node's
 * `writeUInt16BE` validates its offset through a wrapper that allocated an arguments array per call, two
 * per header field (issue #34's allocation profile of the edge).
 */
function writeU16(out: Buffer, value: number, offset: number): void {
  out[offset] = value >>> 8;
  out[offset + 1] = value & 0xff;
}

function writeHeaders(out: Buffer, offset: number, headers: RawHeaders): number {
  writeU16(out, headers.length / 2, offset);
  let o = offset + 2;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    const value = headers[i + 1]!;
    writeU16(out, name.length, o);
    o += 2;
    o += writeLatin1(out, name, o);
    writeU16(out, value.length, o);
    o += 2;
    o += writeLatin1(out, value, o);
  }
  return o;
}

/**
 * Header names decoded lately, by a hash of their length and first and last bytes: the names of one head are
 * mostly those of the last one (the edge's own X-Forwarded-*, the same clients), and a name whose bytes
 * match is taken from here instead of a new string per field per head (issue #34: the agent's
 * per-request allocation is its collector's time). Equal strings either way: nothing else changes.
 */
const NAMES: (string | undefined)[] = new Array<string | undefined>(64).fill(undefined);
const MAX_KEPT_NAME = 40;

class Reader {
  offset = 0;
  readonly buf: Buffer;
  constructor(buf: Buffer) {
    this.buf = buf;
  }
  need(n: number, what: string): void {
    if (this.offset + n > this.buf.length) throw malformed(`head ends inside ${what}`);
  }
  u8(what: string): number {
    this.need(1, what);
    return this.buf[this.offset++]!;
  }
  u16(what: string): number {
    this.need(2, what);
    // Bounds checked just above; Node's readUInt16BE would validate the offset again, through a wrapper.
    const v = (this.buf[this.offset]! << 8) | this.buf[this.offset + 1]!;
    this.offset += 2;
    return v;
  }
  str(length: number, what: string): string {
    this.need(length, what);
    const s = this.buf.toString(ENC, this.offset, this.offset + length);
    this.offset += length;
    return s;
  }
  /** A header name: the same string as the last name of these bytes, when it was kept (see NAMES). */
  name(length: number): string {
    this.need(length, 'header name');
    if (length === 0 || length > MAX_KEPT_NAME) return this.str(length, 'header name');
    const buf = this.buf;
    const start = this.offset;
    const slot = (length * 31 + buf[start]! + buf[start + length - 1]!) & (NAMES.length - 1);
    const kept = NAMES[slot];
    this.offset += length;
    if (kept !== undefined && kept.length === length) {
      let i = 0;
      while (i < length && kept.charCodeAt(i) === buf[start + i]) i++;
      if (i === length) return kept;
    }
    const name = buf.toString(ENC, start, start + length);
    NAMES[slot] = name;
    return name;
  }
  headers(): RawHeaders {
    const count = this.u16('header count');
    const headers: RawHeaders = new Array<string>(count * 2);
    for (let i = 0; i < count; i++) {
      headers[2 * i] = this.name(this.u16('header name length'));
      headers[2 * i + 1] = this.str(this.u16('header value length'), 'header value');
    }
    return headers;
  }
  end(): void {
    if (this.offset !== this.buf.length)
      throw malformed(`${this.buf.length - this.offset} trailing bytes after head`);
  }
}

/** Request head payload: method (u8 len + bytes), target (u16 len + bytes), headers. */
export function encodeRequestHead(head: RequestHead, limit: number): Buffer {
  if (head.method.length === 0 || head.method.length > 0xff)
    throw malformed(`bad method length ${head.method.length}`);
  if (head.target.length > 0xff_ff) throw tooLarge('request target', head.target.length, 0xff_ff);
  const size = 1 + head.method.length + 2 + head.target.length + headersSize(head.headers);
  if (size > limit) throw tooLarge('request head', size, limit);
  const out = Buffer.allocUnsafe(size);
  out[0] = head.method.length;
  let o = 1 + writeLatin1(out, head.method, 1);
  writeU16(out, head.target.length, o);
  o += 2;
  o += writeLatin1(out, head.target, o);
  writeHeaders(out, o, head.headers);
  return out;
}

export function decodeRequestHead(payload: Buffer): RequestHead {
  const r = new Reader(payload);
  const method = r.str(r.u8('method length'), 'method');
  if (method.length === 0) throw malformed('empty method');
  const target = r.str(r.u16('target length'), 'target');
  const headers = r.headers();
  r.end();
  return { method, target, headers };
}

/** Response head payload: status (u16), reason (u8 len + bytes), headers. */
export function encodeResponseHead(head: ResponseHead, limit: number): Buffer {
  if (!Number.isInteger(head.status) || head.status < 100 || head.status > 999) {
    throw malformed(`bad status ${head.status}`);
  }
  const reason = head.statusMessage.length > 0xff ? head.statusMessage.slice(0, 0xff) : head.statusMessage;
  const size = 2 + 1 + reason.length + headersSize(head.headers);
  if (size > limit) throw tooLarge('response head', size, limit);
  const out = Buffer.allocUnsafe(size);
  writeU16(out, head.status, 0);
  out[2] = reason.length;
  const o = 3 + out.write(reason, 3, ENC);
  writeHeaders(out, o, head.headers);
  return out;
}

export function decodeResponseHead(payload: Buffer): ResponseHead {
  const r = new Reader(payload);
  const status = r.u16('status');
  if (status < 100 || status > 999) throw malformed(`bad status ${status}`);
  const statusMessage = r.str(r.u8('reason length'), 'reason');
  const headers = r.headers();
  r.end();
  return { status, statusMessage, headers };
}
