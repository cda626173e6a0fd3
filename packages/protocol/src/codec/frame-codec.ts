import { ErrorCode, FRAME_HEADER_SIZE, FrameFlags, FrameType, MAX_FRAME_LENGTH_FIELD } from '../constants.js';
import { frameError, ProtocolError, ProtocolErrorCode } from '../errors.js';

/** One decoded frame. `payload` is a view into the received bytes, not a copy. */
export interface Frame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

const knownTypes = new Set<number>(Object.values(FrameType));

/** Writes a frame header at `offset` of `target`. */
export function writeFrameHeader(
  target: Buffer,
  offset: number,
  type: number,
  flags: number,
  streamId: number,
  length: number,
): void {
  target[offset] = (length >>> 16) & 0xff;
  target[offset + 1] = (length >>> 8) & 0xff;
  target[offset + 2] = length & 0xff;
  target[offset + 3] = type;
  target[offset + 4] = flags;
  target.writeUInt32BE(streamId, offset + 5);
}

/** Encodes one frame into a new buffer (header and payload together). */
export function encodeFrame(type: number, flags: number, streamId: number, payload?: Uint8Array): Buffer {
  const length = payload?.byteLength ?? 0;
  if (length > MAX_FRAME_LENGTH_FIELD) {
    throw new ProtocolError(
      ProtocolErrorCode.FRAME_TOO_LARGE,
      ErrorCode.FRAME_SIZE_ERROR,
      `frame payload of ${length} bytes exceeds the 24-bit length field`,
    );
  }
  const out = Buffer.allocUnsafe(FRAME_HEADER_SIZE + length);
  writeFrameHeader(out, 0, type, flags, streamId, length);
  if (payload && length > 0) out.set(payload, FRAME_HEADER_SIZE);
  return out;
}

/** Which stream ids a frame type may use: 0 = session only, 1 = a stream only, 2 = either. */
function checkStreamScope(type: number, streamId: number): void {
  switch (type) {
    case FrameType.DATA:
    case FrameType.HEADERS:
    case FrameType.RESET:
      if (streamId === 0) throw frameError(`frame type ${type} on stream 0`);
      return;
    case FrameType.PING:
    case FrameType.GOAWAY:
    case FrameType.HELLO:
    case FrameType.NOTICE:
      if (streamId !== 0) throw frameError(`frame type ${type} on stream ${streamId} (must be 0)`);
      return;
    default:
      return;
  }
}

/** Fixed payload sizes, checked before a frame is handed on. */
function checkPayloadSize(type: number, length: number): void {
  switch (type) {
    case FrameType.RESET:
    case FrameType.WINDOW_UPDATE:
      if (length !== 4) throw frameError(`frame type ${type} needs a 4-byte payload, got ${length}`);
      return;
    case FrameType.PING:
      if (length !== 8) throw frameError(`PING needs an 8-byte payload, got ${length}`);
      return;
    case FrameType.GOAWAY:
      if (length < 8) throw frameError(`GOAWAY needs at least 8 bytes, got ${length}`);
      return;
    default:
      return;
  }
}

/** A decoded frame as its fields: what a receiver on the hot path takes, with no object per frame. */
export type FrameFieldsHandler = (type: number, flags: number, streamId: number, payload: Buffer) => void;

export interface FrameDecoderOptions {
  /** Largest payload accepted; checked from the header, before any byte of the payload is kept. */
  maxFrameSize: number;
  /** Each frame as a `Frame` object. Ignored when `onFrameFields` is given. */
  onFrame?: (frame: Frame) => void;
  /** Each frame as its fields (the session's receive loop: an object per frame was collector time). */
  onFrameFields?: FrameFieldsHandler;
  /**
   * Hands a DATA payload that straddles chunks on in pieces (views of each chunk) instead of joining it:
   * each piece is a DATA frame of its own, END_STREAM only on the last. Off by default (whole frames).
   */
  splitData?: boolean;
}

/**
 * Incremental decoder: bytes may arrive split anywhere. Whole frames in a chunk are handed on as
 * views of that chunk; only a frame that straddles chunks is copied once, into a buffer of exactly its size.
 * Unknown frame types are skipped (forward compatibility). Violations throw a ProtocolError.
 */
export class FrameDecoder {
  readonly #maxFrameSize: number;
  readonly #onFrame: FrameFieldsHandler;
  readonly #splitData: boolean;
  /** DATA payload bytes still to come of a frame passed on in pieces (splitData only). */
  #dataLeft = 0;
  /** Partial frame header bytes (fewer than FRAME_HEADER_SIZE). */
  #headerBuf = Buffer.alloc(FRAME_HEADER_SIZE);
  #headerFill = 0;
  /** Payload of a frame whose header is known but whose payload straddles chunks. */
  #pending: Buffer | undefined;
  #pendingFill = 0;
  #pendingType = 0;
  #pendingFlags = 0;
  #pendingStream = 0;
  #failed: ProtocolError | undefined;

  constructor(options: FrameDecoderOptions) {
    this.#maxFrameSize = options.maxFrameSize;
    const { onFrame, onFrameFields } = options;
    if (onFrameFields !== undefined) this.#onFrame = onFrameFields;
    else if (onFrame !== undefined)
      this.#onFrame = (type, flags, streamId, payload) => onFrame({ type, flags, streamId, payload });
    else throw new TypeError('FrameDecoder needs onFrame or onFrameFields');
    this.#splitData = options.splitData ?? false;
  }

  /**
   * Feeds bytes, or the pieces of one message in order (WebSocket fragments); calls onFrame for each complete
   * frame. After an error the decoder stays failed.
   */
  push(input: Uint8Array | readonly Uint8Array[]): void {
    if (this.#failed) throw this.#failed;
    try {
      if (input instanceof Uint8Array) this.#consume(asBuffer(input));
      else for (const piece of input) this.#consume(asBuffer(piece));
    } catch (err) {
      if (err instanceof ProtocolError) this.#failed = err;
      throw err;
    }
  }

  /** True when no partial frame is buffered: the stream of bytes ended on a frame boundary. */
  get idle(): boolean {
    return this.#headerFill === 0 && this.#pending === undefined && this.#dataLeft === 0;
  }

  #consume(chunk: Buffer): void {
    let offset = 0;
    const end = chunk.length;
    if (this.#dataLeft > 0) {
      offset = this.#continueData(chunk);
      if (this.#dataLeft > 0) return;
    }
    if (this.#pending !== undefined) {
      offset = this.#fillPending(chunk, 0);
      if (this.#pending !== undefined) return;
    }
    if (this.#headerFill > 0) {
      const take = Math.min(FRAME_HEADER_SIZE - this.#headerFill, end - offset);
      chunk.copy(this.#headerBuf, this.#headerFill, offset, offset + take);
      this.#headerFill += take;
      offset += take;
      if (this.#headerFill < FRAME_HEADER_SIZE) return;
      this.#headerFill = 0;
      offset = this.#startFrame(this.#headerBuf, 0, chunk, offset);
      if (this.#pending !== undefined || this.#dataLeft > 0) return;
    }
    while (offset < end) {
      if (end - offset < FRAME_HEADER_SIZE) {
        chunk.copy(this.#headerBuf, 0, offset, end);
        this.#headerFill = end - offset;
        return;
      }
      offset = this.#startFrame(chunk, offset, chunk, offset + FRAME_HEADER_SIZE);
      if (this.#pending !== undefined || this.#dataLeft > 0) return;
    }
  }

  /** Parses the header at `header[h]`; the payload starts at `chunk[offset]`. Returns the next offset. */
  #startFrame(header: Buffer, h: number, chunk: Buffer, offset: number): number {
    const length = (header[h]! << 16) | (header[h + 1]! << 8) | header[h + 2]!;
    const type = header[h + 3]!;
    const flags = header[h + 4]!;
    // Unsigned (a multiplication, not a shift, for the top byte), without Node's checked readUInt32BE.
    const streamId =
      header[h + 5]! * 0x1_00_00_00 + ((header[h + 6]! << 16) | (header[h + 7]! << 8) | header[h + 8]!);
    if (length > this.#maxFrameSize) {
      throw new ProtocolError(
        ProtocolErrorCode.FRAME_TOO_LARGE,
        ErrorCode.FRAME_SIZE_ERROR,
        `frame of ${length} bytes exceeds the limit of ${this.#maxFrameSize}`,
      );
    }
    if (streamId > 0x7f_ff_ff_ff) throw frameError(`stream id ${streamId} uses the reserved high bit`);
    checkStreamScope(type, streamId);
    checkPayloadSize(type, length);
    const available = chunk.length - offset;
    if (available >= length) {
      this.#emit(type, flags, streamId, chunk.subarray(offset, offset + length));
      return offset + length;
    }
    this.#pendingFlags = flags;
    this.#pendingStream = streamId;
    if (this.#splitData && type === FrameType.DATA) {
      this.#dataLeft = length - available;
      if (available > 0) this.#emitPiece(chunk.subarray(offset), false);
      return chunk.length;
    }
    this.#pending = Buffer.allocUnsafe(length);
    this.#pendingType = type;
    chunk.copy(this.#pending, 0, offset);
    this.#pendingFill = available;
    return chunk.length;
  }

  #fillPending(chunk: Buffer, offset: number): number {
    const pending = this.#pending!;
    const take = Math.min(pending.length - this.#pendingFill, chunk.length - offset);
    chunk.copy(pending, this.#pendingFill, offset, offset + take);
    this.#pendingFill += take;
    if (this.#pendingFill < pending.length) return offset + take;
    this.#pending = undefined;
    this.#pendingFill = 0;
    this.#emit(this.#pendingType, this.#pendingFlags, this.#pendingStream, pending);
    return offset + take;
  }

  /** The next piece of a DATA frame passed on in pieces; returns the offset after it. */
  #continueData(chunk: Buffer): number {
    const take = Math.min(this.#dataLeft, chunk.length);
    if (take === 0) return 0;
    this.#dataLeft -= take;
    this.#emitPiece(chunk.subarray(0, take), this.#dataLeft === 0);
    return take;
  }

  #emitPiece(payload: Buffer, last: boolean): void {
    const flags = last ? this.#pendingFlags : this.#pendingFlags & ~FrameFlags.END_STREAM;
    this.#onFrame(FrameType.DATA, flags, this.#pendingStream, payload);
  }

  #emit(type: number, flags: number, streamId: number, payload: Buffer): void {
    if (!knownTypes.has(type)) return;
    this.#onFrame(type, flags, streamId, payload);
  }
}

/** Decodes a buffer that must hold whole frames only (a test and tooling helper). */
export function decodeFrames(bytes: Uint8Array, maxFrameSize = MAX_FRAME_LENGTH_FIELD): Frame[] {
  const frames: Frame[] = [];
  const decoder = new FrameDecoder({ maxFrameSize, onFrame: (f) => frames.push(f) });
  decoder.push(bytes);
  if (!decoder.idle) throw frameError('input ends inside a frame');
  return frames;
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
