import { ErrorCode, MAX_FRAME_LENGTH_FIELD } from './constants.js';
import { ProtocolError, ProtocolErrorCode } from './errors.js';

/** What one side accepts from its peer; announced in HELLO. */
export interface ProtocolSettings {
  /** Streams the peer may have open towards us at once. */
  maxConcurrentStreams: number;
  /** Largest frame payload we accept (bytes). Also bounds a request/response head. */
  maxFrameSize: number;
  /** Bytes of DATA the peer may send on one stream before it needs a WINDOW_UPDATE. */
  initialStreamWindow: number;
  /** Bytes of DATA the peer may send on the whole session before it needs a WINDOW_UPDATE. */
  initialSessionWindow: number;
  /** How often each side pings; a peer silent for two intervals is dead. 0 disables. */
  heartbeatIntervalMs: number;
}

export const MIN_FRAME_SIZE = 16 * 1024;
export const MAX_WINDOW = 0x7f_ff_ff_ff;

export const defaultSettings: Readonly<ProtocolSettings> = Object.freeze({
  maxConcurrentStreams: 1000,
  maxFrameSize: 64 * 1024,
  initialStreamWindow: 256 * 1024,
  initialSessionWindow: 16 * 1024 * 1024,
  heartbeatIntervalMs: 10_000,
});

/**
 * Receive-window auto-tuning: local policy, never announced (see PROTOCOL.md "Receive-window auto-tuning").
 * On by default on both sides. A stream's window grows to at most `maxStreamWindow` (16 MiB: 110 MB/s at a
 * 150 ms round trip); all growth of one session together is at most `sessionWindowBudget` (32 MiB: two
 * streams at full size, or six browser downloads at ~5 MiB each), and the session window is sized by it.
 */
export interface WindowTuning {
  /** Largest a stream's receive window grows to (bytes); at most initialStreamWindow: no tuning. */
  maxStreamWindow: number;
  /** Growth above the initial windows one session may grant in all (bytes); 0: no tuning. */
  sessionWindowBudget: number;
}

export const defaultWindowTuning: Readonly<WindowTuning> = Object.freeze({
  maxStreamWindow: 16 * 1024 * 1024,
  sessionWindowBudget: 32 * 1024 * 1024,
});

export function resolveWindowTuning(
  options: { [K in keyof WindowTuning]?: WindowTuning[K] | undefined } = {},
): WindowTuning {
  const tuning = {
    maxStreamWindow: options.maxStreamWindow ?? defaultWindowTuning.maxStreamWindow,
    sessionWindowBudget: options.sessionWindowBudget ?? defaultWindowTuning.sessionWindowBudget,
  };
  checkRange('maxStreamWindow', tuning.maxStreamWindow, 0, MAX_WINDOW);
  checkRange('sessionWindowBudget', tuning.sessionWindowBudget, 0, MAX_WINDOW);
  return tuning;
}

/** The settings a peer is assumed to have until its HELLO arrives: the smallest legal values. */
export const settingsBeforeHello: Readonly<ProtocolSettings> = Object.freeze({
  maxConcurrentStreams: 0,
  maxFrameSize: MIN_FRAME_SIZE,
  initialStreamWindow: 0,
  initialSessionWindow: 0,
  heartbeatIntervalMs: 0,
});

function invalid(name: string, value: number, allowed: string): ProtocolError {
  return new ProtocolError(
    ProtocolErrorCode.INVALID_SETTING,
    ErrorCode.PROTOCOL_ERROR,
    `invalid setting ${name}=${value}: must be ${allowed}`,
  );
}

function checkRange(name: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw invalid(name, value, `an integer in [${min}, ${max}]`);
  }
}

/** Validates settings (ours at construction, the peer's from HELLO); throws a typed error naming the setting. */
export function validateSettings(settings: ProtocolSettings): ProtocolSettings {
  checkRange('maxConcurrentStreams', settings.maxConcurrentStreams, 0, 1_000_000);
  checkRange('maxFrameSize', settings.maxFrameSize, MIN_FRAME_SIZE, MAX_FRAME_LENGTH_FIELD);
  checkRange('initialStreamWindow', settings.initialStreamWindow, 0, MAX_WINDOW);
  checkRange('initialSessionWindow', settings.initialSessionWindow, 0, MAX_WINDOW);
  checkRange('heartbeatIntervalMs', settings.heartbeatIntervalMs, 0, 3_600_000);
  return settings;
}

export function resolveSettings(partial: Partial<ProtocolSettings> = {}): ProtocolSettings {
  return validateSettings({ ...defaultSettings, ...partial });
}

/**
 * Flood protection: local policy, not announced to the peer (see PROTOCOL.md "Flood protection").
 * Modelled on nghttp2's max_outbound_ack and Envoy's max_outbound_control_frames and
 * max_consecutive_inbound_frames_with_empty_payload.
 */
export interface FloodLimits {
  /**
   * Answers the peer can provoke without limit (a PING ACK for each PING, a RESET refusing each stream it
   * opens) queued to it and not yet written to the transport. A peer that floods them and does not read
   * (a PING or RESET flood) passes it; the session then closes with ENHANCE_YOUR_CALM. Frames this side
   * sends on its own account (WINDOW_UPDATEs, RESETs of its streams, heartbeats) are bounded by windows,
   * streams and time, and never count: a busy, slow but honest peer is never cut off.
   */
  maxQueuedAnswers: number;
  /** DATA frames with no bytes and no END_STREAM in a row; past it the session closes (empty-frames flood). */
  maxConsecutiveEmptyFrames: number;
}

export const defaultFloodLimits: Readonly<FloodLimits> = Object.freeze({
  maxQueuedAnswers: 1000,
  maxConsecutiveEmptyFrames: 100,
});

export function resolveFloodLimits(partial: Partial<FloodLimits> = {}): FloodLimits {
  const limits = { ...defaultFloodLimits, ...partial };
  checkRange('maxQueuedAnswers', limits.maxQueuedAnswers, 1, 1_000_000);
  checkRange('maxConsecutiveEmptyFrames', limits.maxConsecutiveEmptyFrames, 0, 1_000_000);
  return limits;
}
