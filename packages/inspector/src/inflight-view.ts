import { decodeRequestHead } from '@tunnel2/protocol';
import type { ExchangeRecorder } from './capture.js';
import type { InFlightSummary } from './entry.js';
import { pairs } from './entry-view.js';

/**
 * The API's view of the exchanges still running. Everything here happens when a client asks (the page polls
 * while it is visible), never per request: a recorder gets its key the first time it is listed, in a WeakMap
 * that lets it go with the exchange.
 */
export function createInFlightView(): (recorders: readonly ExchangeRecorder[]) => InFlightSummary[] {
  const keys = new WeakMap<ExchangeRecorder, string>();
  let next = 0;
  const keyOf = (recorder: ExchangeRecorder): string => {
    let key = keys.get(recorder);
    if (key === undefined) {
      key = `f${++next}`;
      keys.set(recorder, key);
    }
    return key;
  };
  return (recorders) =>
    recorders.map((recorder) => ({
      ...recorder.progress(),
      // The rounded start the entry is stored with (progress() truncates it): the page matches the two.
      startedAt: new Date(recorder.startedAt).toISOString(),
      key: keyOf(recorder),
      requestHeaders: requestHeaders(recorder.requestHeadBytes),
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
