import {
  encodeHelloPayload,
  encodeRequestHead,
  encodeResponseHead,
  FrameType,
  PROTOCOL_VERSION,
  type ProtocolSettings,
  resolveSettings,
} from '@tunnel2/protocol';
import fc from 'fast-check';

// A fast-check model of a hostile agent: one sequence is what one agent session does, from its HELLO to its
// last frame. Sequences are plain data (so fast-check can shrink and print them); fuzz-run.ts plays them.

/** How the session starts. Everything but `valid` is a session error the edge must close the session for. */
export type HelloMode = 'valid' | 'none' | 'twice' | 'bad-version' | 'bad-setting' | 'garbage' | 'silent';

/** A stream id as the fuzzer means it: a number, or the edge's stream most recently answered. */
export type StreamRef = number | 'answered';

/** One frame, well-formed or not, written byte by byte (so a reserved bit or a lying length can go out). */
export interface RawFrame {
  type: number;
  flags: number;
  stream: StreamRef;
  payload: Uint8Array;
  /** Damage done to the encoded bytes. */
  mutation?:
    | { kind: 'flip'; at: number; value: number }
    | { kind: 'length'; value: number }
    | { kind: 'cut'; at: number };
}

/** How the agent answers a public request the fuzzer made to its own tunnel name. */
export interface Answer {
  /** Interim (1xx) heads before the final one; the big counts are a flood. */
  interim: number;
  interimStatus: number;
  head: 'valid' | 'malformed' | 'crlf' | 'status-101' | 'none';
  /** Content-Length the final head declares, if any. */
  declared: number | undefined;
  /** DATA bytes actually sent (may be more or fewer than declared). */
  body: number;
  /** The excess bytes spell a whole HTTP response: if the edge writes them, a client would take it as the next. */
  smuggle: boolean;
  ending: 'end' | 'trailers' | 'reset' | 'open' | 'data-after-end';
}

export type Action =
  | { kind: 'frames'; frames: RawFrame[] }
  | { kind: 'request'; answer: Answer }
  | { kind: 'pause' }
  | { kind: 'resume' }
  /** Stops reading, then sends `megabytes` of frames each of which the edge answers (PING, agent-opened HEADERS). */
  | { kind: 'flood'; frame: 'ping' | 'agent-stream'; megabytes: number };

export interface Sequence {
  hello: HelloMode;
  settings: Partial<ProtocolSettings>;
  /** WebSocket message boundaries: each flush is cut into pieces of these sizes in turn (0: one message). */
  chunks: number[];
  actions: Action[];
}

/** Writes a frame header without the codec's checks, so a fuzz frame can break every rule. */
export function rawFrameBytes(frame: RawFrame, answered: number): Buffer {
  const stream = frame.stream === 'answered' ? answered : frame.stream;
  const out = Buffer.allocUnsafe(9 + frame.payload.length);
  out.writeUIntBE(Math.min(frame.payload.length, 0xff_ff_ff), 0, 3);
  out[3] = frame.type;
  out[4] = frame.flags;
  out.writeUInt32BE(stream >>> 0, 5);
  out.set(frame.payload, 9);
  const m = frame.mutation;
  if (m === undefined) return out;
  switch (m.kind) {
    case 'flip':
      out[m.at % out.length] = m.value;
      return out;
    case 'length':
      out.writeUIntBE(m.value, 0, 3);
      return out;
    case 'cut':
      return out.subarray(0, m.at % out.length);
  }
}

export function helloPayload(
  settings: Partial<ProtocolSettings>,
  min = PROTOCOL_VERSION,
  max = PROTOCOL_VERSION,
): Buffer {
  return encodeHelloPayload({
    minVersion: min,
    maxVersion: max,
    settings: resolveSettings({ heartbeatIntervalMs: 0, ...settings }),
    meta: { agent: 'fuzzer' },
  });
}

const u32 = (n: number): Buffer => {
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32BE(n >>> 0, 0);
  return b;
};

const streamRef: fc.Arbitrary<StreamRef> = fc.oneof(
  { weight: 4, arbitrary: fc.constant<StreamRef>('answered') },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: 2000 }) },
  { weight: 1, arbitrary: fc.constantFrom(0x7f_ff_ff_ff, 0x7f_ff_ff_fe, 0x80_00_00_01, 0xff_ff_ff_ff) },
);

const bytes = (max: number): fc.Arbitrary<Uint8Array> => fc.uint8Array({ maxLength: max });

const responseHeadBytes: fc.Arbitrary<Uint8Array> = fc
  .record({
    status: fc.integer({ min: 100, max: 999 }),
    reason: fc.string({ maxLength: 12 }),
    headers: fc.array(fc.string({ maxLength: 12 }), { maxLength: 6 }),
  })
  .map(({ status, reason, headers }) =>
    encodeResponseHead(
      { status, statusMessage: reason, headers: headers.length % 2 === 0 ? headers : [...headers, ''] },
      65_536,
    ),
  );

/** A frame that is well-formed at the frame level but may mean nothing sensible. */
const plausibleFrame: fc.Arbitrary<RawFrame> = fc.oneof(
  fc.record({
    type: fc.constant(FrameType.PING),
    flags: fc.integer({ min: 0, max: 1 }),
    stream: fc.constant<StreamRef>(0),
    payload: fc.uint8Array({ minLength: 8, maxLength: 8 }),
  }),
  fc.record({
    type: fc.constant(FrameType.WINDOW_UPDATE),
    flags: fc.constant(0),
    stream: streamRef,
    // 0 and > 2^31-1 are session errors; a big one on top of the window overflows it.
    payload: fc
      .oneof(
        fc.integer({ min: 1, max: 65_536 }),
        fc.constantFrom(0, 0x7f_ff_ff_ff, 0x80_00_00_00, 0xff_ff_ff_ff),
      )
      .map(u32),
  }),
  fc.record({
    type: fc.constant(FrameType.RESET),
    flags: fc.constant(0),
    stream: streamRef,
    payload: fc.integer({ min: 0, max: 20 }).map(u32),
  }),
  fc.record({
    type: fc.constant(FrameType.DATA),
    flags: fc.integer({ min: 0, max: 1 }),
    stream: streamRef,
    payload: bytes(64),
  }),
  fc.record({
    type: fc.constant(FrameType.HEADERS),
    flags: fc.integer({ min: 0, max: 1 }),
    stream: streamRef,
    payload: fc.oneof(responseHeadBytes, bytes(40)),
  }),
  // The agent opening streams of its own (even ids): refused.
  fc.record({
    type: fc.constant(FrameType.HEADERS),
    flags: fc.constant(1),
    stream: fc.integer({ min: 1, max: 1_000_000 }).map((n) => 2 * n),
    payload: fc.constant(encodeRequestHead({ method: 'GET', target: '/', headers: ['x', '1'] }, 65_536)),
  }),
  fc.record({
    type: fc.constant(FrameType.GOAWAY),
    flags: fc.constant(0),
    stream: fc.constant<StreamRef>(0),
    payload: fc
      .tuple(fc.nat(), fc.integer({ min: 0, max: 20 }), fc.string({ maxLength: 20 }))
      .map(([last, code, reason]) => Buffer.concat([u32(last), u32(code), Buffer.from(reason)])),
  }),
  fc.record({
    type: fc.constant(FrameType.HELLO),
    flags: fc.integer({ min: 0, max: 1 }),
    stream: fc.constant<StreamRef>(0),
    payload: fc.oneof(fc.constant(helloPayload({})), bytes(20)),
  }),
  // Unknown types are skipped, whatever their stream id.
  fc.record({
    type: fc.integer({ min: 7, max: 255 }),
    flags: fc.nat(255),
    stream: streamRef,
    payload: bytes(32),
  }),
);

const mutation: fc.Arbitrary<RawFrame['mutation']> = fc.oneof(
  fc.record({ kind: fc.constant<'flip'>('flip'), at: fc.nat(64), value: fc.nat(255) }),
  fc.record({ kind: fc.constant<'length'>('length'), value: fc.nat(0xff_ff_ff) }),
  fc.record({ kind: fc.constant<'cut'>('cut'), at: fc.nat(64) }),
);

/** Mostly plausible frames, with the occasional damaged one, as the old in-process fuzzer mixed them (the link fuzzer uses them too). */
export const frame: fc.Arbitrary<RawFrame> = fc.oneof(
  { weight: 30, arbitrary: plausibleFrame },
  { weight: 1, arbitrary: fc.tuple(plausibleFrame, mutation).map(([f, m]) => ({ ...f, mutation: m })) },
  {
    weight: 1,
    arbitrary: fc.record({ type: fc.nat(255), flags: fc.nat(255), stream: fc.nat(), payload: bytes(64) }),
  },
);

const answer: fc.Arbitrary<Answer> = fc.record({
  interim: fc.oneof(
    { weight: 8, arbitrary: fc.integer({ min: 0, max: 3 }) },
    { weight: 1, arbitrary: fc.integer({ min: 2_000, max: 20_000 }) },
  ),
  interimStatus: fc.constantFrom(100, 102, 103, 199),
  head: fc.constantFrom<Answer['head']>('valid', 'valid', 'valid', 'malformed', 'crlf', 'status-101', 'none'),
  declared: fc.option(fc.integer({ min: 0, max: 4096 }), { nil: undefined }),
  body: fc.integer({ min: 0, max: 4096 }),
  smuggle: fc.boolean(),
  ending: fc.constantFrom<Answer['ending']>('end', 'end', 'trailers', 'reset', 'open', 'data-after-end'),
});

const action: fc.Arbitrary<Action> = fc.oneof(
  {
    weight: 40,
    arbitrary: fc.record({
      kind: fc.constant<'frames'>('frames'),
      frames: fc.array(frame, { minLength: 1, maxLength: 300 }),
    }),
  },
  { weight: 24, arbitrary: fc.record({ kind: fc.constant<'request'>('request'), answer }) },
  { weight: 4, arbitrary: fc.constant<Action>({ kind: 'pause' }) },
  { weight: 4, arbitrary: fc.constant<Action>({ kind: 'resume' }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant<'flood'>('flood'),
      frame: fc.constantFrom<'ping' | 'agent-stream'>('ping', 'agent-stream'),
      megabytes: fc.integer({ min: 8, max: 24 }),
    }),
  },
);

export const sequence: fc.Arbitrary<Sequence> = fc.record({
  hello: fc.oneof(
    { weight: 60, arbitrary: fc.constant<HelloMode>('valid') },
    {
      weight: 5,
      arbitrary: fc.constantFrom<HelloMode>('none', 'twice', 'bad-version', 'bad-setting', 'garbage'),
    },
    // Rare: the edge takes helloTimeoutMs to give up on it.
    { weight: 1, arbitrary: fc.constant<HelloMode>('silent') },
  ),
  settings: fc.record(
    {
      maxConcurrentStreams: fc.integer({ min: 0, max: 1000 }),
      maxFrameSize: fc.integer({ min: 16_384, max: 1 << 20 }),
      initialStreamWindow: fc.integer({ min: 0, max: 1 << 20 }),
      initialSessionWindow: fc.integer({ min: 0, max: 1 << 24 }),
    },
    { requiredKeys: [] },
  ),
  chunks: fc.oneof(
    fc.constant<number[]>([0]),
    fc.array(fc.integer({ min: 1, max: 16_384 }), { minLength: 1, maxLength: 8 }),
  ),
  actions: fc.array(action, { minLength: 1, maxLength: 12 }),
});
