import { decodeRequestHead } from '@tunnel2/protocol';
import type { InFlightSummary } from './entry.js';
import { pairs } from './entry-view.js';
import type { ExchangeSlot } from './exchange-slot.js';

/**
 * The API's view of the exchanges still running. Everything here happens when a client asks (the page polls
 * while it is visible), never per request: an exchange gets its key the first time it is listed. Slots are
 * reused from one exchange to the next, so the key is remembered with the slot's generation: a slot listed
 * again for a later exchange gets a new key.
 */
export function createInFlightView(): (slots: readonly ExchangeSlot[]) => InFlightSummary[] {
  const keys = new WeakMap<ExchangeSlot, { generation: number; key: string }>();
  let next = 0;
  const keyOf = (slot: ExchangeSlot): string => {
    const known = keys.get(slot);
    if (known !== undefined && known.generation === slot.generation) return known.key;
    const key = `f${++next}`;
    keys.set(slot, { generation: slot.generation, key });
    return key;
  };
  return (slots) =>
    slots.map((slot) => ({
      ...slot.progress(),
      // The rounded start the entry is stored with (progress() truncates it): the page matches the two.
      startedAt: new Date(Math.round(performance.timeOrigin + slot.started)).toISOString(),
      key: keyOf(slot),
      requestHeaders: requestHeaders(slot.heads.subarray(0, slot.requestHeadLength)),
    }));
}

function requestHeaders(head: Uint8Array): [string, string][] {
  try {
    return pairs(decodeRequestHead(Buffer.from(head.buffer, head.byteOffset, head.byteLength)).headers);
  } catch {
    // The recorder encoded this head itself or copied a frame the agent already decoded: never expected.
    return [];
  }
}
