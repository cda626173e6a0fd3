import { decodeRequestHead } from '@tunnel2/protocol';
import type { ExchangeSlot } from '../capture/exchange-slot.js';
import type { InFlightSummary } from '../entries/entry.js';
import { flightKeyOf } from '../entries/stored-entry.js';
import { pairs } from './entry-view.js';

/**
 * The API's view of an exchange still running, built only when a client asks (the page polls while it is
 * visible), never per request. Its key is the slot's sequence number, given when the exchange opened and
 * stored with its entry: a reused slot holds a new number, and an entry names the row it ends exactly.
 */
export function toInFlightSummary(slot: ExchangeSlot): InFlightSummary {
  return {
    ...slot.progress(),
    // The rounded start the entry is stored with (progress() truncates it).
    startedAt: new Date(Math.round(performance.timeOrigin + slot.started)).toISOString(),
    key: flightKeyOf(slot.seq),
    requestHeaders: requestHeaders(slot.heads.subarray(0, slot.requestHeadLength)),
  };
}

function requestHeaders(head: Uint8Array): [string, string][] {
  try {
    return pairs(decodeRequestHead(Buffer.from(head.buffer, head.byteOffset, head.byteLength)).headers);
  } catch {
    // The recorder encoded this head itself or copied a frame the agent already decoded: never expected.
    return [];
  }
}
