import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeFrames,
  defaultSettings,
  ErrorCode,
  encodeHello,
  encodeHelloPayload,
  type Hello,
  MIN_FRAME_SIZE,
  negotiateVersion,
  PROTOCOL_VERSION,
  ProtocolError,
  ProtocolErrorCode,
  type ProtocolSettings,
  parseHello,
  resolveSettings,
  validateSettings,
  versionRangesOf,
} from '../src/index.js';
import { hex } from './support/bytes.js';

// minVersion u16, maxVersion u16, count u16, count × (id u16, value u32), JSON metadata.
const defaultHelloPayload = hex(`
  0001 0001 0005
  0001 000003e8
  0002 00010000
  0003 00040000
  0004 01000000
  0005 00002710
  7b7d
`);

const defaultHello: Hello = { minVersion: 1, maxVersion: 1, settings: { ...defaultSettings }, meta: {} };

function caught(run: () => unknown): ProtocolError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ProtocolError);
    return error as ProtocolError;
  }
  throw new Error('expected a ProtocolError, nothing was thrown');
}

describe('HELLO', () => {
  it('encodes the default settings to the golden payload', () => {
    expect(encodeHelloPayload(defaultHello)).toEqual(defaultHelloPayload);
  });

  it('frames HELLO on stream 0, with ACK only on the answer', () => {
    expect(encodeHello(defaultHello, false)).toEqual(
      Buffer.concat([hex('000026 06 00 00000000'), defaultHelloPayload]),
    );
    expect(encodeHello(defaultHello, true).subarray(0, 9)).toEqual(hex('000026 06 01 00000000'));
    const [frame] = decodeFrames(encodeHello(defaultHello, true));
    expect(parseHello(frame!.payload)).toEqual(defaultHello);
  });

  it('parses the golden payload', () => {
    expect(parseHello(defaultHelloPayload)).toEqual(defaultHello);
  });

  it('round-trips settings and metadata', () => {
    const hello: Hello = {
      minVersion: 1,
      maxVersion: 3,
      settings: {
        maxConcurrentStreams: 0,
        maxFrameSize: MIN_FRAME_SIZE,
        initialStreamWindow: 0,
        initialSessionWindow: 0x7f_ff_ff_ff,
        heartbeatIntervalMs: 0,
      },
      meta: { session: 'abc', urls: ['https://abc.example'], nested: { n: 1 } },
    };
    expect(parseHello(encodeHelloPayload(hello))).toEqual(hello);
  });

  it('keeps defaults for settings left out and ignores unknown setting ids', () => {
    // Two settings: an unknown id 0x99, then MAX_FRAME_SIZE = 32 KiB; no metadata at all.
    const payload = hex('0001 0002 0002 0099 ffffffff 0002 00008000');
    expect(parseHello(payload)).toEqual({
      minVersion: 1,
      maxVersion: 2,
      settings: { ...defaultSettings, maxFrameSize: 32 * 1024 },
      meta: {},
    });
  });

  it.each([
    ['shorter than 6 bytes', hex('0001 0001 00')],
    ['an empty version range', hex('0002 0001 0000')],
    ['more settings announced than present', hex('0001 0001 0002 0001 00000001')],
    ['metadata that is not JSON', Buffer.concat([hex('0001 0001 0000'), Buffer.from('{nope')])],
    ['metadata that is an array', Buffer.concat([hex('0001 0001 0000'), Buffer.from('[1]')])],
    ['metadata that is null', Buffer.concat([hex('0001 0001 0000'), Buffer.from('null')])],
  ])('rejects a payload with %s', (_what, payload) => {
    const error = caught(() => parseHello(payload));
    expect(error.code).toBe(ProtocolErrorCode.MALFORMED_FRAME);
    expect(error.protocolCode).toBe(ErrorCode.PROTOCOL_ERROR);
  });

  it('rejects a peer setting out of range, naming it', () => {
    const error = caught(() => parseHello(hex('0001 0001 0001 0002 00000400')));
    expect(error.code).toBe(ProtocolErrorCode.INVALID_SETTING);
    expect(error.message).toContain('maxFrameSize');
  });

  it('round-trips any valid settings and JSON metadata', () => {
    const settings: fc.Arbitrary<ProtocolSettings> = fc.record({
      maxConcurrentStreams: fc.integer({ min: 0, max: 1_000_000 }),
      maxFrameSize: fc.integer({ min: MIN_FRAME_SIZE, max: 0xff_ff_ff }),
      initialStreamWindow: fc.integer({ min: 0, max: 0x7f_ff_ff_ff }),
      initialSessionWindow: fc.integer({ min: 0, max: 0x7f_ff_ff_ff }),
      heartbeatIntervalMs: fc.integer({ min: 0, max: 3_600_000 }),
    });
    const meta = fc.dictionary(
      fc.stringMatching(/^[a-z]{1,8}$/),
      fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null)),
    );
    const hello = fc
      .tuple(fc.integer({ min: 0, max: 0xff_ff }), fc.integer({ min: 0, max: 0xff_ff }), settings, meta)
      .map(
        ([a, b, s, m]): Hello => ({
          minVersion: Math.min(a, b),
          maxVersion: Math.max(a, b),
          settings: s,
          meta: m,
        }),
      );
    fc.assert(
      fc.property(hello, (h) => {
        expect(parseHello(encodeHelloPayload(h))).toEqual(h);
      }),
    );
  });
});

describe('negotiateVersion', () => {
  it('defaults to this implementation speaking exactly PROTOCOL_VERSION', () => {
    expect(negotiateVersion({ minVersion: 1, maxVersion: 5 })).toBe(PROTOCOL_VERSION);
  });

  it('picks the highest version both sides speak', () => {
    expect(negotiateVersion({ minVersion: 1, maxVersion: 3 }, { minVersion: 2, maxVersion: 5 })).toBe(3);
    expect(negotiateVersion({ minVersion: 4, maxVersion: 9 }, { minVersion: 2, maxVersion: 5 })).toBe(5);
    expect(negotiateVersion({ minVersion: 2, maxVersion: 2 }, { minVersion: 2, maxVersion: 2 })).toBe(2);
  });

  it('throws VERSION_UNSUPPORTED naming both ranges when they do not overlap', () => {
    for (const [peer, local] of [
      [
        { minVersion: 3, maxVersion: 4 },
        { minVersion: 1, maxVersion: 2 },
      ],
      [
        { minVersion: 1, maxVersion: 2 },
        { minVersion: 3, maxVersion: 4 },
      ],
    ] as const) {
      const error = caught(() => negotiateVersion(peer, local));
      expect(error.code).toBe(ProtocolErrorCode.VERSION_UNSUPPORTED);
      expect(error.protocolCode).toBe(ErrorCode.VERSION_UNSUPPORTED);
      expect(error.message).toContain(`${peer.minVersion}..${peer.maxVersion}`);
      expect(error.message).toContain(`${local.minVersion}..${local.maxVersion}`);
    }
  });
});

describe('validateSettings', () => {
  it('accepts the defaults and returns the same object', () => {
    const settings = { ...defaultSettings };
    expect(validateSettings(settings)).toBe(settings);
  });

  it.each([
    ['maxConcurrentStreams', -1],
    ['maxConcurrentStreams', 1_000_001],
    ['maxConcurrentStreams', 1.5],
    ['maxFrameSize', MIN_FRAME_SIZE - 1],
    ['maxFrameSize', 0x1_00_00_00],
    ['initialStreamWindow', -1],
    ['initialStreamWindow', 0x80_00_00_00],
    ['initialSessionWindow', Number.NaN],
    ['initialSessionWindow', 0x80_00_00_00],
    ['heartbeatIntervalMs', 3_600_001],
  ] as const)('rejects %s = %s with INVALID_SETTING naming it', (name, value) => {
    const error = caught(() => validateSettings({ ...defaultSettings, [name]: value }));
    expect(error.code).toBe(ProtocolErrorCode.INVALID_SETTING);
    expect(error.protocolCode).toBe(ErrorCode.PROTOCOL_ERROR);
    expect(error.message).toContain(`${name}=`);
  });

  it('resolveSettings fills in defaults and validates', () => {
    expect(resolveSettings()).toEqual(defaultSettings);
    expect(resolveSettings({ maxFrameSize: 20_000 })).toEqual({ ...defaultSettings, maxFrameSize: 20_000 });
    expect(caught(() => resolveSettings({ heartbeatIntervalMs: -5 })).message).toContain(
      'heartbeatIntervalMs',
    );
  });
});

describe('versionRangesOf', () => {
  it("reads both ranges back from negotiateVersion's refusal (a VERSION_UNSUPPORTED reason)", () => {
    fc.assert(
      fc.property(fc.nat(100), fc.nat(5), fc.nat(100), fc.nat(5), (a, da, b, db) => {
        const peer = { minVersion: a, maxVersion: a + da };
        const local = { minVersion: b, maxVersion: b + db };
        let reason: string | undefined;
        try {
          negotiateVersion(peer, local);
        } catch (err) {
          reason = (err as Error).message;
        }
        if (reason === undefined) return;
        expect(versionRangesOf(reason)).toEqual({ receiver: peer, sender: local });
      }),
    );
    expect(versionRangesOf('agent shutting down')).toBeUndefined();
  });
});
