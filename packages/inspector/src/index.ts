// What the agent (packages/cli) uses; the package's own tests import ../src directly.

export type { ExchangeRecorder } from './capture/capture.js';
export { createCapture, type InspectorCapture, type RequestStart } from './capture/capture.js';
export { EntryStore } from './capture/entry-store.js';
export type { ReplayRequest, ReplayTarget } from './capture/replay.js';
export type {
  Body,
  Entry,
  EntryError,
  EntryHosts,
  EntrySummary,
  InFlightExchange,
  InFlightSummary,
  WebSocketTraffic,
} from './entries/entry.js';
export type { StoredEntry } from './entries/stored-entry.js';
export { InspectorError, InspectorErrorCode } from './errors.js';
export { createInspector, type Inspector, type InspectorOptions } from './inspector.js';
export { toEntry } from './views/entry-view.js';
export { toHar } from './views/har.js';
export type { RawExchange, RawMessage } from './views/wire-view.js';
