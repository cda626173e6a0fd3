import { ErrorCode } from '../constants.js';
import { ProtocolError, ProtocolErrorCode } from '../errors.js';

/**
 * The head that opens a TCP stream (edge → agent): which public port a client connected to, and from
 * where. It starts with a zero byte where a request head has its method length: a request head's method
 * is never empty, so an agent that predates TCP streams refuses this one as a malformed head (a stream
 * RESET PROTOCOL_ERROR) instead of forwarding it as an HTTP request. See PROTOCOL.md "TCP streams".
 */
export interface TcpHead {
  /** The edge's public port the client connected to. */
  port: number;
  /** The client's address as the edge saw it (IPv4 or IPv6 text). */
  clientAddress: string;
  clientPort: number;
}

/** The stream kind byte after the leading zero; other values are kinds a later version may add. */
const StreamKind = { TCP: 0x01 } as const;

/** The capability an agent lists in its HELLO metadata (`streamKinds`) to receive TCP streams. */
export const TCP_STREAM_KIND = 'tcp';

/**
 * How an agent asks for a TCP tunnel's public port (the agent endpoint's `tcp` parameter, a listed tunnel's
 * `tcp` in HELLO metadata): whichever free port of the edge's range, or that port.
 */
export const ANY_TCP_PORT = 'any';
export type TcpPortAsk = typeof ANY_TCP_PORT | number;

/** The port a `tcp=` parameter asks for: undefined for any free one, NaN when it is neither `any` nor a port. */
export function tcpPortOfParam(text: string): number | undefined {
  if (text === ANY_TCP_PORT) return undefined;
  return /^\d{1,5}$/.test(text) ? Number(text) : Number.NaN;
}

const MAX_ADDRESS = 0xff;

function malformed(message: string): ProtocolError {
  return new ProtocolError(ProtocolErrorCode.MALFORMED_HEAD, ErrorCode.PROTOCOL_ERROR, message);
}

/** `00`, kind `01`, port u16, address (u8 length + latin1 bytes), client port u16. */
export function encodeTcpHead(head: TcpHead): Buffer {
  const address = head.clientAddress.slice(0, MAX_ADDRESS);
  const out = Buffer.allocUnsafe(2 + 2 + 1 + address.length + 2);
  out[0] = 0;
  out[1] = StreamKind.TCP;
  out.writeUInt16BE(head.port, 2);
  out[4] = address.length;
  out.write(address, 5, 'latin1');
  out.writeUInt16BE(head.clientPort, 5 + address.length);
  return out;
}

/** True when a stream's first head is a TCP stream's (the leading zero byte no request head has). */
function isTcpHead(payload: Buffer): boolean {
  return payload.length >= 2 && payload[0] === 0 && payload[1] === StreamKind.TCP;
}

/** Parses a TCP stream's head; the payload must be used up exactly. */
export function decodeTcpHead(payload: Buffer): TcpHead {
  if (!isTcpHead(payload)) throw malformed('not a TCP stream head');
  if (payload.length < 5) throw malformed('TCP stream head is truncated');
  const port = payload.readUInt16BE(2);
  const length = payload[4]!;
  if (payload.length !== 5 + length + 2) throw malformed('TCP stream head has the wrong length');
  return {
    port,
    clientAddress: payload.toString('latin1', 5, 5 + length),
    clientPort: payload.readUInt16BE(5 + length),
  };
}
