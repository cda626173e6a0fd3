import { channel } from 'node:diagnostics_channel';
import type { Duplex } from 'node:stream';
import type { EdgeErrorCode } from '../errors.js';

/** What the edge refused and on which connection (so each edge's metrics count only their own sockets). */
export interface RefusalMessage {
  socket: Duplex | null;
  code: EdgeErrorCode;
}

/**
 * Every answer the edge gives instead of tunnelling (an HTTP error, a refused upgrade) is published here.
 * A diagnostics channel costs one property check when nobody listens, and keeps the error paths free of
 * any knowledge of metrics.
 */
export const refusalChannel = channel('tunnel2:edge:refusal');

export function publishRefusal(socket: Duplex | null, code: EdgeErrorCode): void {
  if (refusalChannel.hasSubscribers) refusalChannel.publish({ socket, code } satisfies RefusalMessage);
}
