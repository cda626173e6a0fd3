/** The protocol version this implementation speaks. See PROTOCOL.md "Version negotiation". */
export const PROTOCOL_VERSION = 1;

/** The protocol versions a HELLO offers, lowest and highest (this build speaks exactly one). */
export interface VersionRange {
  readonly minVersion: number;
  readonly maxVersion: number;
}
export const ownVersionRange: VersionRange = { minVersion: PROTOCOL_VERSION, maxVersion: PROTOCOL_VERSION };

/** Every frame starts with this many bytes: length (u24), type (u8), flags (u8), stream id (u32). */
export const FRAME_HEADER_SIZE = 9;

/** The largest value the 24-bit length field can carry. */
export const MAX_FRAME_LENGTH_FIELD = 0xff_ff_ff;

/** Every type above HEADERS is a control frame (counted by flood protection, see OutboundBatch). */
export const FrameType = {
  DATA: 0x0,
  HEADERS: 0x1,
  RESET: 0x2,
  WINDOW_UPDATE: 0x3,
  PING: 0x4,
  GOAWAY: 0x5,
  HELLO: 0x6,
  /** Session metadata that changed after HELLO (a JSON object), edge to agent; a peer without it skips it. */
  NOTICE: 0x7,
} as const;
export type FrameType = (typeof FrameType)[keyof typeof FrameType];

/**
 * The largest NOTICE payload a receiver reads (PROTOCOL.md §8); a longer one is skipped unparsed, as an
 * unknown frame is. Today's NOTICE (`{"replicas": n}`) is some 20 bytes: this bounds what a hostile peer
 * can make the other parse per frame far below the frame size.
 */
export const MAX_NOTICE_BYTES = 4096;

/**
 * The most DATA an edge sends on an upgrade stream before the agent's final head (PROTOCOL.md "Upgrades"):
 * a client's first message, sent before the 101. The agent holds these bytes, and their session credit,
 * until its backend answers: at a whole stream window (256 KiB) each, 200 unanswered upgrades held all of
 * an agent's 48 MiB session window and every other stream stood still; at 16 KiB the 1,000 streams of a
 * session hold 16 MiB. The edge leaves the rest unread in the client's connection; the agent resets a
 * stream that brings more (an edge from before this limit).
 */
export const MAX_EARLY_UPGRADE_BYTES = 16 * 1024;

/**
 * Interim (1xx) heads one response may have before its final head; one more is a flood and fails the
 * exchange: at the edge (502, the stream reset PROTOCOL_ERROR) and at the agent, which stops reading its
 * backend and answers 502 itself. Legitimate backends send one 100, a 103 or two, and a 102 now and then
 * during a long request; Go's HTTP client gives up after 5 (max1xxResponses). 32 leaves room for a 102
 * every few seconds for minutes while bounding the decode work and bytes one stream can cost.
 */
export const MAX_INTERIM_HEADS = 32;

export const FrameFlags = {
  /** DATA, HEADERS: the sender will send nothing more on this stream. */
  END_STREAM: 0x1,
  /** PING, HELLO: this frame answers the peer's frame of the same type. */
  ACK: 0x1,
} as const;

/** Error codes carried by RESET and GOAWAY frames. Stable: they are part of the wire format. */
export const ErrorCode = {
  NO_ERROR: 0,
  PROTOCOL_ERROR: 1,
  INTERNAL_ERROR: 2,
  FLOW_CONTROL_ERROR: 3,
  STREAM_CLOSED: 4,
  FRAME_SIZE_ERROR: 5,
  REFUSED_STREAM: 6,
  /** The requester went away (public client disconnected): abort the work. */
  CANCEL: 7,
  /** The agent could not connect to its local target. */
  BACKEND_UNREACHABLE: 8,
  /** The local target failed after the exchange began (reset, bad response). */
  BACKEND_ERROR: 9,
  /** The local target did not answer in time. */
  BACKEND_TIMEOUT: 10,
  VERSION_UNSUPPORTED: 11,
  /** A request or response head exceeded a limit. */
  HEADERS_TOO_LARGE: 12,
  /** The sender is shutting down gracefully. */
  GOING_AWAY: 13,
  /** Local only, never sent: the session's transport closed underneath the stream. */
  SESSION_CLOSED: 14,
  /** GOAWAY: a newer connection of the same owner took this session's name; do not reconnect. */
  SESSION_REPLACED: 15,
  /**
   * GOAWAY: the peer flooded this side (answers it provoked and did not read, or frames that carry
   * nothing); named after HTTP/2's code for the same. See PROTOCOL.md "Flood protection".
   */
  ENHANCE_YOUR_CALM: 16,
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

const errorCodeNames = new Map<number, string>(Object.entries(ErrorCode).map(([name, code]) => [code, name]));

/** The name of a wire error code, or `UNKNOWN(<n>)` for codes from a newer peer. */
export function errorCodeName(code: number): string {
  return errorCodeNames.get(code) ?? `UNKNOWN(${code})`;
}

/** Setting identifiers carried in HELLO. Unknown ids are ignored so peers can add settings. */
export const SettingId = {
  MAX_CONCURRENT_STREAMS: 0x1,
  MAX_FRAME_SIZE: 0x2,
  INITIAL_STREAM_WINDOW: 0x3,
  INITIAL_SESSION_WINDOW: 0x4,
  HEARTBEAT_INTERVAL_MS: 0x5,
} as const;
