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

/**
 * Sends one binary message as WebSocket fragments of at most WS_FRAGMENT_SIZE bytes. A receiver that reads
 * whole messages sees no difference (ws joins them, as it joins one frame spanning reads); one that takes
 * fragments (binaryType 'fragments', MuxSession.receive) gets most of them as views of its socket reads
 * instead of a fresh copy of the whole message. `done` runs after the last fragment, which ws writes last.
 */
function sendInFragments(
  socket: FragmentSocket,
  message: Buffer,
  done: (error?: Error | null) => void,
): void {
  let offset = 0;
  while (message.length - offset > WS_FRAGMENT_SIZE) {
    socket.send(message.subarray(offset, offset + WS_FRAGMENT_SIZE), MORE);
    offset += WS_FRAGMENT_SIZE;
  }
  socket.send(offset === 0 ? message : message.subarray(offset), LAST, done);
}

/** The byte stream beneath a WebSocket (its net.Socket or TLSSocket), kept structural as above. */
export interface CorkableStream {
  cork(): void;
  uncork(): void;
}

/**
 * `sendInFragments` with the stream beneath corked for the whole message: ws writes each fragment as a frame
 * of its own, and uncorked each one would be a write system call; corked, one message's fragments leave in
 * one write. Without the stream (not known yet), fragments go out one by one.
 */
export function sendCorkedInFragments(
  socket: FragmentSocket,
  beneath: CorkableStream | undefined,
  message: Buffer,
  done: (error?: Error | null) => void,
): void {
  if (beneath === undefined || message.length <= WS_FRAGMENT_SIZE) {
    sendInFragments(socket, message, done);
    return;
  }
  beneath.cork();
  try {
    sendInFragments(socket, message, done);
  } finally {
    beneath.uncork();
  }
}

const MORE: FragmentOptions = { binary: true, compress: false, fin: false };
const LAST: FragmentOptions = { binary: true, compress: false, fin: true };
