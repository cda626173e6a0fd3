import { defaultSettings, type ProtocolSettings, validateSettings } from '../config.js';
import {
  ErrorCode,
  FrameFlags,
  FrameType,
  ownVersionRange,
  SettingId,
  type VersionRange,
} from '../constants.js';
import { frameError, ProtocolError, ProtocolErrorCode } from '../errors.js';
import { encodeFrame } from './frame-codec.js';

/** A side's handshake: the versions it speaks, its settings, and free-form metadata (session info). */
export interface Hello {
  minVersion: number;
  maxVersion: number;
  settings: ProtocolSettings;
  /** JSON-serializable; the edge's answer carries the session name and public URLs here. */
  meta: Record<string, unknown>;
}

const settingOrder: ReadonlyArray<[number, keyof ProtocolSettings]> = [
  [SettingId.MAX_CONCURRENT_STREAMS, 'maxConcurrentStreams'],
  [SettingId.MAX_FRAME_SIZE, 'maxFrameSize'],
  [SettingId.INITIAL_STREAM_WINDOW, 'initialStreamWindow'],
  [SettingId.INITIAL_SESSION_WINDOW, 'initialSessionWindow'],
  [SettingId.HEARTBEAT_INTERVAL_MS, 'heartbeatIntervalMs'],
];
const settingById = new Map<number, keyof ProtocolSettings>(settingOrder);

/**
 * HELLO payload: minVersion (u16), maxVersion (u16), setting count (u16), count × (id u16, value u32),
 * then UTF-8 JSON metadata to the end of the payload.
 */
export function encodeHelloPayload(hello: Hello): Buffer {
  const meta = Buffer.from(JSON.stringify(hello.meta), 'utf8');
  const payload = Buffer.allocUnsafe(6 + settingOrder.length * 6 + meta.length);
  payload.writeUInt16BE(hello.minVersion, 0);
  payload.writeUInt16BE(hello.maxVersion, 2);
  payload.writeUInt16BE(settingOrder.length, 4);
  let offset = 6;
  for (const [id, key] of settingOrder) {
    payload.writeUInt16BE(id, offset);
    payload.writeUInt32BE(hello.settings[key], offset + 2);
    offset += 6;
  }
  meta.copy(payload, offset);
  return payload;
}

export function encodeHello(hello: Hello, ack: boolean): Buffer {
  return encodeFrame(FrameType.HELLO, ack ? FrameFlags.ACK : 0, 0, encodeHelloPayload(hello));
}

export function parseHello(payload: Buffer): Hello {
  if (payload.length < 6) throw frameError(`HELLO needs at least 6 bytes, got ${payload.length}`);
  const minVersion = payload.readUInt16BE(0);
  const maxVersion = payload.readUInt16BE(2);
  const count = payload.readUInt16BE(4);
  if (minVersion > maxVersion) throw frameError(`HELLO version range ${minVersion}..${maxVersion} is empty`);
  const settingsEnd = 6 + count * 6;
  if (settingsEnd > payload.length) throw frameError(`HELLO announces ${count} settings but is too short`);
  // Settings the peer leaves out keep the protocol defaults.
  const settings: ProtocolSettings = { ...defaultSettings };
  for (let offset = 6; offset < settingsEnd; offset += 6) {
    const key = settingById.get(payload.readUInt16BE(offset));
    if (key !== undefined) settings[key] = payload.readUInt32BE(offset + 2);
  }
  validateSettings(settings);
  let meta: Record<string, unknown> = {};
  if (settingsEnd < payload.length) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(payload.toString('utf8', settingsEnd));
    } catch (cause) {
      throw new ProtocolError(
        ProtocolErrorCode.MALFORMED_FRAME,
        ErrorCode.PROTOCOL_ERROR,
        'HELLO metadata is not JSON',
        {
          cause,
        },
      );
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw frameError('HELLO metadata must be a JSON object');
    }
    meta = parsed as Record<string, unknown>;
  }
  return { minVersion, maxVersion, settings, meta };
}

/** Picks the highest version both sides speak, or throws VERSION_UNSUPPORTED naming both ranges. */
export function negotiateVersion(peer: VersionRange, local: VersionRange = ownVersionRange): number {
  const version = Math.min(peer.maxVersion, local.maxVersion);
  if (version < peer.minVersion || version < local.minVersion) {
    throw new ProtocolError(
      ProtocolErrorCode.VERSION_UNSUPPORTED,
      ErrorCode.VERSION_UNSUPPORTED,
      `no common protocol version: peer speaks ${peer.minVersion}..${peer.maxVersion}, ` +
        `this side ${local.minVersion}..${local.maxVersion}`,
    );
  }
  return version;
}

/**
 * The two ranges in the reason of a VERSION_UNSUPPORTED GOAWAY, as negotiateVersion words it ("peer speaks
 * a..b, this side c..d"; every edge since version 1 closes with it): `sender` is the side that refused.
 * Undefined for any other text. It lets the refused side name both versions to its user.
 */
export function versionRangesOf(
  reason: string,
): { receiver: VersionRange; sender: VersionRange } | undefined {
  const match = /peer speaks (\d+)\.\.(\d+), this side (\d+)\.\.(\d+)/.exec(reason);
  if (match === null) return undefined;
  return {
    receiver: { minVersion: Number(match[1]), maxVersion: Number(match[2]) },
    sender: { minVersion: Number(match[3]), maxVersion: Number(match[4]) },
  };
}
