export * from './codec/control-frames.js';
export * from './codec/frame-codec.js';
export * from './codec/grpc-form.js';
export * from './codec/hello.js';
export {
  addConnectionOptions,
  connectionOptions,
  dropHopByHop,
  isFieldName,
  isHopByHop,
  isHopByHopName,
  withoutHopByHop,
} from './codec/hop-by-hop.js';
export * from './codec/http-head.js';
export * from './codec/tcp-head.js';
export * from './codec/tunnel-tag.js';
export * from './config.js';
export * from './constants.js';
export * from './errors.js';
export { PROBE_QUIET_MS } from './session/heartbeat.js';
export * from './session/mux-session.js';
export * from './session/mux-session-options.js';
export { MuxStream, type StreamHandler } from './session/mux-stream.js';
export { OutboundBatch } from './session/outbound-batch.js';
export { WindowBudget } from './session/window-budget.js';
export {
  type BridgedSocket,
  type BridgeOptions,
  type BridgeResult,
  bridgeSocket,
  REFUSAL_REPLAY_BYTES,
} from './transport/socket-bridge.js';
export {
  type CorkableStream,
  type FragmentSocket,
  sendCorkedPieces,
  WS_FRAGMENT_SIZE,
} from './transport/ws-fragments.js';
export { maskingNeeded, zeroMask } from './transport/ws-masking.js';
