export * from './config.js';
export * from './constants.js';
export * from './control-frames.js';
export * from './errors.js';
export * from './frame-codec.js';
export { PROBE_QUIET_MS } from './heartbeat.js';
export * from './hello.js';
export { withoutHopByHop } from './hop-by-hop.js';
export * from './http-head.js';
export * from './mux-session.js';
export * from './mux-session-options.js';
export { MuxStream, type StreamHandler } from './mux-stream.js';
export { OutboundBatch } from './outbound-batch.js';
export { type BridgedSocket, type BridgeOptions, type BridgeResult, bridgeSocket } from './socket-bridge.js';
export * from './tcp-head.js';
export * from './tunnel-tag.js';
export { WindowBudget } from './window-budget.js';
export {
  type CorkableStream,
  type FragmentSocket,
  sendCorkedPieces,
  WS_FRAGMENT_SIZE,
} from './ws-fragments.js';
export { maskingNeeded, zeroMask } from './ws-masking.js';
