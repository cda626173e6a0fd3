export { BodyCapture } from './body-capture.js';
export { decodeBody } from './body-decoding.js';
export {
  createCapture,
  DEFAULT_BODY_LIMIT,
  ExchangeRecorder,
  type InspectorCapture,
  type RequestStart,
} from './capture.js';
export { toCurl } from './curl.js';
export type { Body, Entry, EntryError, EntrySummary, WebSocketTraffic } from './entry.js';
export { matches, parseFilter } from './entry-filter.js';
export { DEFAULT_BUDGET_BYTES, DEFAULT_MAX_ENTRIES, EntryStore } from './entry-store.js';
export { toEntry, toSummary } from './entry-view.js';
export { InspectorError, InspectorErrorCode } from './errors.js';
export { toHar } from './har.js';
export {
  createInspector,
  DEFAULT_INSPECTOR_HOST,
  DEFAULT_INSPECTOR_PORTS,
  type Inspector,
  type InspectorOptions,
} from './inspector.js';
export { type ReplayEdits, type ReplayTarget, replay } from './replay.js';
export type { StoredEntry } from './stored-entry.js';
