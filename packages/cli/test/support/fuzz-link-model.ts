import type { ProtocolSettings } from '@tunnel2/protocol';
import fc from 'fast-check';
import { frame, type RawFrame } from './fuzz-model.js';

// A fast-check model of a hostile peer node that holds the cluster secret: one sequence is one link, from
// the fuzzer's HELLO to its last frame. Plain data, like fuzz-model.ts; fuzz-link-run.ts plays it.

/** How the fuzzer answers the target's HELLO. Everything but `valid` must end the link. */
export type LinkHelloMode = 'valid' | 'none' | 'twice' | 'bad-version' | 'garbage' | 'silent';

/** The head of a stream the fuzzer opens, as the target's link-request.ts will read it. */
export type LinkHead =
  /** A request for the target's own session, with the link metadata where an ingress puts it. */
  | 'steady'
  /** For a session the target does not hold. */
  | 'unknown'
  /** Without the link metadata (the session and client fields), or with them out of place. */
  | 'no-meta'
  | 'meta-first'
  /** A TCP stream's head (the target has no TCP ports). */
  | 'tcp'
  /** Bytes that are no head. */
  | 'garbage';

export type LinkAction =
  /** Frames of every kind, well-formed or damaged; 'answered' is the stream the fuzzer opened last. */
  | { kind: 'frames'; frames: RawFrame[] }
  /** One stream opened with `head`, `body` bytes sent, then ended, reset, or left open. */
  | { kind: 'open'; head: LinkHead; target: string; body: number; ending: 'end' | 'reset' | 'open' }
  /** `count` requests for the steady session opened and reset at once, in one message (rapid reset). */
  | { kind: 'rapid-reset'; count: number }
  | { kind: 'pause' }
  | { kind: 'resume' }
  /** Stops reading and sends `megabytes` of PINGs, each of which the target answers. */
  | { kind: 'ping-flood'; megabytes: number };

export interface LinkSequence {
  hello: LinkHelloMode;
  settings: Partial<ProtocolSettings>;
  /** WebSocket message boundaries: each flush is cut into pieces of these sizes in turn (0: one message). */
  chunks: number[];
  actions: LinkAction[];
}

const target = fc.oneof(
  { weight: 4, arbitrary: fc.constant('/loadtest/ping') },
  { weight: 1, arbitrary: fc.constantFrom('/', '/bytes/70000', '/echo/request/x', '/status/500') },
  { weight: 1, arbitrary: fc.string({ maxLength: 30 }).map((text) => `/${text}`) },
);

const action: fc.Arbitrary<LinkAction> = fc.oneof(
  {
    weight: 30,
    arbitrary: fc.record({
      kind: fc.constant<'frames'>('frames'),
      frames: fc.array(frame, { minLength: 1, maxLength: 300 }),
    }),
  },
  {
    weight: 30,
    arbitrary: fc.record({
      kind: fc.constant<'open'>('open'),
      head: fc.constantFrom<LinkHead>(
        'steady',
        'steady',
        'steady',
        'unknown',
        'no-meta',
        'meta-first',
        'tcp',
        'garbage',
      ),
      target,
      body: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 70_000 })),
      ending: fc.constantFrom<'end' | 'reset' | 'open'>('end', 'end', 'reset', 'open'),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant<'rapid-reset'>('rapid-reset'),
      count: fc.integer({ min: 10, max: 2_000 }),
    }),
  },
  { weight: 3, arbitrary: fc.constant<LinkAction>({ kind: 'pause' }) },
  { weight: 3, arbitrary: fc.constant<LinkAction>({ kind: 'resume' }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant<'ping-flood'>('ping-flood'),
      megabytes: fc.integer({ min: 2, max: 8 }),
    }),
  },
);

export const linkSequence: fc.Arbitrary<LinkSequence> = fc.record({
  hello: fc.oneof(
    { weight: 40, arbitrary: fc.constant<LinkHelloMode>('valid') },
    { weight: 4, arbitrary: fc.constantFrom<LinkHelloMode>('none', 'twice', 'bad-version', 'garbage') },
    // Rare: the target takes helloTimeoutMs to give up on it.
    { weight: 1, arbitrary: fc.constant<LinkHelloMode>('silent') },
  ),
  settings: fc.record(
    {
      maxConcurrentStreams: fc.integer({ min: 0, max: 5000 }),
      maxFrameSize: fc.integer({ min: 16_384, max: 1 << 20 }),
      initialStreamWindow: fc.integer({ min: 0, max: 1 << 20 }),
      initialSessionWindow: fc.integer({ min: 0, max: 1 << 26 }),
    },
    { requiredKeys: [] },
  ),
  chunks: fc.oneof(
    fc.constant<number[]>([0]),
    fc.array(fc.integer({ min: 1, max: 16_384 }), { minLength: 1, maxLength: 8 }),
  ),
  actions: fc.array(action, { minLength: 1, maxLength: 12 }),
});
