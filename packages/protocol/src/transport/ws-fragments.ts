/** WebSocket fragments at most this big fit mostly inside one 64 KiB socket read of the receiver. */
export const WS_FRAGMENT_SIZE = 16 * 1024;

interface FragmentOptions {
  binary: true;
  compress: false;
  fin: boolean;
}

/** The sending half of a ws WebSocket, kept structural: the protocol package imports no network library. */
export interface FragmentSocket {
  send(data: Buffer, options: FragmentOptions, cb?: (error?: Error) => void): void;
}

/** The byte stream beneath a WebSocket (its net.Socket or TLSSocket), kept structural as above. */
export interface CorkableStream {
  cork(): void;
  uncork(): void;
}

/**
 * Sends one binary message, given as pieces (a PieceTransport's), as WebSocket fragments of at most
 * WS_FRAGMENT_SIZE bytes: each piece is one fragment or, when longer, several views of it; nothing is
 * copied. A receiver that reads whole messages sees no difference (ws joins them, as it joins one frame
 * spanning reads); one that takes fragments (binaryType 'fragments', MuxSession.receive) gets most of them as
 * views of its socket reads instead of a fresh copy of the whole message. The stream beneath is corked for
 * the whole message: ws writes each fragment as a frame of its own, and uncorked each one would be a write
 * system call; corked, one message's fragments leave in one write (without the stream, not known yet, they
 * go out one by one). `done` runs after the last fragment, which ws writes last.
 */
export function sendCorkedPieces(
  socket: FragmentSocket,
  beneath: CorkableStream | undefined,
  pieces: readonly Buffer[],
  done: (error?: Error | null) => void,
): void {
  if (pieces.length === 0) {
    socket.send(EMPTY, LAST, done);
    return;
  }
  const corked = beneath !== undefined && (pieces.length > 1 || (pieces[0]?.length ?? 0) > WS_FRAGMENT_SIZE);
  if (corked) beneath.cork();
  try {
    const last = pieces.length - 1;
    for (let p = 0; p <= last; p++) {
      const piece = pieces[p]!;
      let offset = 0;
      while (piece.length - offset > WS_FRAGMENT_SIZE) {
        socket.send(piece.subarray(offset, offset + WS_FRAGMENT_SIZE), MORE);
        offset += WS_FRAGMENT_SIZE;
      }
      const rest = offset === 0 ? piece : piece.subarray(offset);
      if (p === last) socket.send(rest, LAST, done);
      else socket.send(rest, MORE);
    }
  } finally {
    if (corked) beneath.uncork();
  }
}

const EMPTY = Buffer.alloc(0);
const MORE: FragmentOptions = { binary: true, compress: false, fin: false };
const LAST: FragmentOptions = { binary: true, compress: false, fin: true };
