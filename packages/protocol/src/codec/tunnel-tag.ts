import { ErrorCode } from '../constants.js';
import { ProtocolError, ProtocolErrorCode } from '../errors.js';

/**
 * Several tunnels on one session (PROTOCOL.md "Several tunnels on one session"). The session's own tunnel
 * (index 0, the one named in the agent endpoint's URL) keeps untagged heads, byte for byte as before. A
 * stream for one of the tunnels the agent listed in its HELLO (`tunnels`, index 1…n) starts with a tag in
 * front of the head it would otherwise carry (a request head or a TCP head): `00 02 <u16 index>`. The
 * leading zero is where a request head has its method length, which is never 0, so an agent that never
 * asked for tunnels refuses such a stream as a malformed head rather than forwarding it to the wrong place.
 */

/** The stream-kind byte of a tag (TCP heads use 01). */
const TUNNEL_TAG_KIND = 0x02;
/** Bytes a tag adds in front of a head. */
export const TUNNEL_TAG_SIZE = 4;
/** The capability an agent lists in its HELLO metadata (`streamKinds`) with its `tunnels`. */
export const TUNNEL_STREAM_KIND = 'tunnel';
/** Tunnels one session may ask for beside its own (a bound on the HELLO's work for the edge). */
export const MAX_SESSION_TUNNELS = 32;

/** `00 02 <index u16>` then `head`, as the HEADERS payload of a stream for tunnel `index` (≥ 1). */
export function encodeTunnelTag(index: number, head: Buffer): Buffer {
  if (!Number.isInteger(index) || index < 1 || index > 0xff_ff) {
    throw new ProtocolError(
      ProtocolErrorCode.MALFORMED_HEAD,
      ErrorCode.PROTOCOL_ERROR,
      `bad tunnel index ${index}`,
    );
  }
  const out = Buffer.allocUnsafe(TUNNEL_TAG_SIZE + head.length);
  out[0] = 0;
  out[1] = TUNNEL_TAG_KIND;
  out.writeUInt16BE(index, 2);
  head.copy(out, TUNNEL_TAG_SIZE);
  return out;
}

/**
 * Which tunnel a stream's first head is for, and the head without the tag (a view, not a copy). An
 * untagged head is the session's own tunnel (index 0). A tag naming index 0 is malformed: that tunnel's
 * heads carry none.
 */
export function decodeTunnelTag(payload: Buffer): { index: number; head: Buffer } {
  if (payload.length < 2 || payload[0] !== 0 || payload[1] !== TUNNEL_TAG_KIND)
    return { index: 0, head: payload };
  if (payload.length < TUNNEL_TAG_SIZE) {
    throw new ProtocolError(
      ProtocolErrorCode.MALFORMED_HEAD,
      ErrorCode.PROTOCOL_ERROR,
      'tunnel tag is truncated',
    );
  }
  const index = payload.readUInt16BE(2);
  if (index === 0) {
    throw new ProtocolError(
      ProtocolErrorCode.MALFORMED_HEAD,
      ErrorCode.PROTOCOL_ERROR,
      'tunnel tag names index 0 (the session tunnel is untagged)',
    );
  }
  return { index, head: payload.subarray(TUNNEL_TAG_SIZE) };
}
