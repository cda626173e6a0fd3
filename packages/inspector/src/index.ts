// What the agent (packages/cli) uses; the package's own tests import ../src directly.

export type { ExchangeRecorder } from './capture.js';
export { createCapture, type InspectorCapture, type RequestStart } from './capture.js';
export type {
  Body,
  Entry,
  EntryError,
  EntryHosts,
  EntrySummary,
  InFlightExchange,
  InFlightSummary,
  WebSocketTraffic,
} from './entry.js';
export { EntryStore } from './entry-store.js';
export { toEntry } from './entry-view.js';
export { InspectorError, InspectorErrorCode } from './errors.js';
export { toHar } from './har.js';
export { createInspector, type Inspector, type InspectorOptions } from './inspector.js';
export type { ReplayTarget } from './replay.js';
export type { StoredEntry } from './stored-entry.js';
export type { RawExchange, RawMessage } from './wire-view.js';
