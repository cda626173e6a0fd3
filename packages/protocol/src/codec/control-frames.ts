import { MAX_WINDOW } from '../config.js';
import { FrameType } from '../constants.js';
import { frameError } from '../errors.js';
import { encodeFrame } from './frame-codec.js';

/** A u32 payload: RESET's error code, WINDOW_UPDATE's increment. */
export function u32Payload(value: number): Buffer {
  const payload = Buffer.allocUnsafe(4);
  payload.writeUInt32BE(value, 0);
  return payload;
}

/** RESET payload: the error code (u32). */
export function encodeReset(streamId: number, code: number): Buffer {
  return encodeFrame(FrameType.RESET, 0, streamId, u32Payload(code));
}

export function parseReset(payload: Buffer): number {
  return payload.readUInt32BE(0);
}

/** WINDOW_UPDATE payload: the credit increment (u32, 1..2^31-1). Stream 0 credits the whole session. */
export function encodeWindowUpdate(streamId: number, increment: number): Buffer {
  return encodeFrame(FrameType.WINDOW_UPDATE, 0, streamId, u32Payload(increment));
}

export function parseWindowUpdate(payload: Buffer): number {
  const increment = payload.readUInt32BE(0);
  if (increment === 0 || increment > MAX_WINDOW) {
    throw frameError(`WINDOW_UPDATE increment ${increment} outside [1, ${MAX_WINDOW}]`);
  }
  return increment;
}

export interface GoAway {
  /** The highest stream id the sender has accepted or opened; later streams were not processed. */
  lastStreamId: number;
  code: number;
  reason: string;
}

/** GOAWAY payload: last stream id (u32), error code (u32), UTF-8 reason (rest). */
export function encodeGoAway(goAway: GoAway): Buffer {
  return encodeFrame(FrameType.GOAWAY, 0, 0, goAwayPayload(goAway));
}

export function goAwayPayload(goAway: GoAway): Buffer {
  const reason = Buffer.from(goAway.reason, 'utf8');
  const payload = Buffer.allocUnsafe(8 + reason.length);
  payload.writeUInt32BE(goAway.lastStreamId, 0);
  payload.writeUInt32BE(goAway.code, 4);
  reason.copy(payload, 8);
  return payload;
}

export function parseGoAway(payload: Buffer): GoAway {
  return {
    lastStreamId: payload.readUInt32BE(0),
    code: payload.readUInt32BE(4),
    reason: payload.toString('utf8', 8),
  };
}
