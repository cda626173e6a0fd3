/**
 * Counts the WebSocket messages in one direction of an upgraded connection by reading only the frame
 * headers (RFC 6455 §5.2) as the bytes pass: payloads are skipped by arithmetic, never looked at or kept.
 * Headers may be split across chunks anywhere; the state is a handful of numbers whatever the traffic.
 *
 * A message is counted when its final frame's header is read: a fragmented message (a data frame, then
 * continuations, the last with FIN) counts once. Control frames (close, ping, pong) are not messages.
 */
export class WsFrameCounter {
  /** Data messages whose final frame has begun. */
  messages = 0;
  /** The bytes stopped looking like frames (a 64-bit length past 2^53): counting stops there. */
  broken = false;
  /** Header byte being read: 0 first, 1 second, then extended length and mask key bytes. */
  #headerByte = 0;
  /** Bytes of the current header still to read after the second (extended length, mask key). */
  #headerLeft = 0;
  /** Extended length bytes still to read (they come before the mask key). */
  #lengthLeft = 0;
  #masked = false;
  /** The current frame's payload length, built from its extended length bytes. */
  #length = 0;
  /** Payload bytes of the current frame still to skip. */
  #payloadLeft = 0;

  add(chunk: Uint8Array): void {
    let i = 0;
    const n = chunk.length;
    while (i < n && !this.broken) {
      if (this.#payloadLeft > 0) {
        const skip = Math.min(this.#payloadLeft, n - i);
        this.#payloadLeft -= skip;
        i += skip;
        continue;
      }
      const byte = chunk[i++]!;
      if (this.#headerByte === 0) this.#first(byte);
      else if (this.#headerByte === 1) this.#second(byte);
      else this.#extra(byte);
    }
  }

  #first(byte: number): void {
    const fin = (byte & 0x80) !== 0;
    const opcode = byte & 0x0f;
    // Opcodes 0-7 carry data (0 continues a fragmented message); 8-15 are control frames.
    if (fin && opcode < 8) this.messages++;
    this.#headerByte = 1;
  }

  #second(byte: number): void {
    this.#masked = (byte & 0x80) !== 0;
    const length = byte & 0x7f;
    this.#lengthLeft = length === 126 ? 2 : length === 127 ? 8 : 0;
    this.#length = this.#lengthLeft === 0 ? length : 0;
    this.#headerLeft = this.#lengthLeft + (this.#masked ? 4 : 0);
    this.#headerByte = 2;
    if (this.#headerLeft === 0) this.#startPayload();
  }

  #extra(byte: number): void {
    if (this.#lengthLeft > 0) {
      // The 64-bit length's most significant bit must be 0; past 2^53 a number would lose bytes.
      if (this.#lengthLeft === 8 && byte > 0x1f) {
        this.broken = true;
        return;
      }
      this.#length = this.#length * 256 + byte;
      this.#lengthLeft--;
    }
    this.#headerLeft--;
    if (this.#headerLeft === 0) this.#startPayload();
  }

  #startPayload(): void {
    this.#payloadLeft = this.#length;
    this.#headerByte = 0;
  }
}
