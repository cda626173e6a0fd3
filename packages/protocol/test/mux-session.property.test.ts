import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ErrorCode, MIN_FRAME_SIZE } from '../src/index.js';
import { afterQueuedImmediates, deferred } from './support/deferred.js';
import { requestHead } from './support/exchange.js';
import { connectPair } from './support/mux-harness.js';
import { type ConsumeMode, StreamRecorder, writeBody } from './support/stream-recorder.js';

interface Scenario {
  streamWindow: number;
  sessionWindow: number;
  edgeFrameSize: number;
  agentFrameSize: number;
  highWaterMark: number;
  /** Messages arrive in pieces of this size (0: whole), as ws hands over fragments. */
  pieceSize: number;
  /** The sender hands messages over as pieces, large payloads uncopied (the WebSocket transports' way). */
  pieceTransport: boolean;
  streams: { size: number; chunk: number; mode: ConsumeMode }[];
}

interface Bounds {
  minWindow: number;
  maxWindow: number;
  maxSessionWindow: number;
  maxBody: number;
  minChunk: number;
}

function scenarioWithin(b: Bounds): fc.Arbitrary<Scenario> {
  return fc.record({
    streamWindow: fc.integer({ min: b.minWindow, max: b.maxWindow }),
    sessionWindow: fc.integer({ min: b.minWindow, max: b.maxSessionWindow }),
    edgeFrameSize: fc.integer({ min: MIN_FRAME_SIZE, max: 64 * 1024 }),
    agentFrameSize: fc.integer({ min: MIN_FRAME_SIZE, max: 64 * 1024 }),
    highWaterMark: fc.integer({ min: 512, max: 1024 * 1024 }),
    pieceSize: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 20_000 })),
    pieceTransport: fc.boolean(),
    streams: fc.array(
      fc.record({
        size: fc.integer({ min: 0, max: b.maxBody }),
        chunk: fc.integer({ min: b.minChunk, max: 30_000 }),
        mode: fc.constantFrom<ConsumeMode>('sync', 'next-turn'),
      }),
      { minLength: 1, maxLength: 8 },
    ),
  });
}

/**
 * Runs `work` and fails if the pair goes quiet before it finishes: every step of progress in the in-memory
 * pair happens on a setImmediate, so several idle turns in a row mean a deadlock, not slowness.
 */
async function withoutDeadlock(work: Promise<void>, activity: () => number): Promise<void> {
  let done = false;
  let failure: unknown;
  work.then(
    () => {
      done = true;
    },
    (error: unknown) => {
      done = true;
      failure = error;
    },
  );
  let idleTurns = 0;
  let last = activity();
  while (!done) {
    await afterQueuedImmediates();
    const now = activity();
    idleTurns = now === last ? idleTurns + 1 : 0;
    last = now;
    if (idleTurns > 20) throw new Error('deadlock: no traffic and no progress for 20 event-loop turns');
  }
  if (failure !== undefined) throw failure;
}

describe('session properties', () => {
  it.each([
    // Realistic windows with bodies several windows long.
    {
      name: 'large windows',
      minWindow: 1024,
      maxWindow: 64 * 1024,
      maxSessionWindow: 256 * 1024,
      maxBody: 60_000,
      minChunk: 500,
      runs: 60,
    },
    // Windows down to one byte: credit returns after every byte, the stream and session limits bind constantly.
    {
      name: 'tiny windows',
      minWindow: 1,
      maxWindow: 64,
      maxSessionWindow: 300,
      maxBody: 2000,
      minChunk: 1,
      runs: 30,
    },
  ])(
    '$name: every mix of windows, frame sizes, chunkings and consumers delivers every body intact',
    async (bounds) => {
      await fc.assert(
        fc.asyncProperty(scenarioWithin(bounds), async (s) => {
          const pair = await connectPair({
            settings: { initialStreamWindow: s.streamWindow, initialSessionWindow: s.sessionWindow },
            edgeSettings: { maxFrameSize: s.edgeFrameSize },
            agentSettings: { maxFrameSize: s.agentFrameSize },
            highWaterMark: s.highWaterMark,
            pieceSize: s.pieceSize,
            pieceTransport: s.pieceTransport,
          });
          try {
            const atAgent: StreamRecorder[] = [];
            let maxSessionUnconsumed = 0;
            pair.agent.events.onStreamOpened = (stream) => {
              const recorder = new StreamRecorder(stream, s.streams[atAgent.length]!.mode);
              recorder.onChunk = () => {
                const total = atAgent.reduce((sum, r) => sum + r.unconsumed, 0);
                maxSessionUnconsumed = Math.max(maxSessionUnconsumed, total);
              };
              atAgent.push(recorder);
            };
            const bodies = s.streams.map((plan) => randomBytes(plan.size));
            const allDelivered = deferred();
            const work = Promise.all(
              s.streams.map(async (plan, i) => {
                const recorder = new StreamRecorder(pair.edge.session.openStream());
                recorder.stream.sendHeaders(requestHead(`/${i}`), false);
                await writeBody(recorder, bodies[i]!, plan.chunk);
              }),
            ).then(async () => {
              while (atAgent.length < s.streams.length) await afterQueuedImmediates();
              await Promise.all(atAgent.map((r) => r.ended.promise));
              allDelivered.resolve();
            });
            const activity = () =>
              pair.edge.transport.sent.frames.length +
              pair.agent.transport.sent.frames.length +
              atAgent.reduce((sum, r) => sum + r.consumed, 0);
            await withoutDeadlock(work, activity);
            await allDelivered.promise;

            atAgent.forEach((recorder, i) => {
              expect(recorder.body().equals(bodies[i]!)).toBe(true);
              expect(recorder.maxUnconsumed).toBeLessThanOrEqual(s.streamWindow);
            });
            expect(maxSessionUnconsumed).toBeLessThanOrEqual(s.sessionWindow);
            for (const frame of pair.edge.transport.sent.frames) {
              expect(frame.payload.length).toBeLessThanOrEqual(s.agentFrameSize);
            }
            expect(pair.edge.session.closed || pair.agent.session.closed).toBe(false);
          } finally {
            pair.dispose();
          }
        }),
        { numRuns: bounds.runs },
      );
    },
  );
  it('resets at random points mid-body never leak session credit or stall the other streams', async () => {
    const plan = fc.record({
      streamWindow: fc.integer({ min: 256, max: 32 * 1024 }),
      sessionWindow: fc.integer({ min: 256, max: 64 * 1024 }),
      streams: fc.array(
        fc.record({
          size: fc.integer({ min: 1, max: 40_000 }),
          chunk: fc.integer({ min: 200, max: 20_000 }),
          // Where in the body the agent resets, as a fraction; undefined = served to the end.
          resetAt: fc.option(fc.double({ min: 0, max: 1, noNaN: true }), { nil: undefined }),
        }),
        { minLength: 1, maxLength: 8 },
      ),
    });
    await fc.assert(
      fc.asyncProperty(plan, async (p) => {
        const pair = await connectPair({
          settings: { initialStreamWindow: p.streamWindow, initialSessionWindow: p.sessionWindow },
        });
        try {
          const atAgent: StreamRecorder[] = [];
          pair.agent.events.onStreamOpened = (stream) => {
            const { resetAt, size } = p.streams[atAgent.length]!;
            const recorder = new StreamRecorder(stream, 'next-turn');
            if (resetAt !== undefined) {
              const threshold = Math.max(1, Math.floor(resetAt * size));
              recorder.onChunk = () => {
                if (recorder.received >= threshold) stream.reset(ErrorCode.CANCEL);
              };
            }
            atAgent.push(recorder);
          };
          const work = Promise.all(
            p.streams.map(async (s, i) => {
              const recorder = new StreamRecorder(pair.edge.session.openStream());
              recorder.stream.sendHeaders(requestHead(`/${i}`), false);
              // A reset stream makes its writer fail; that is the expected outcome, not an error.
              await writeBody(recorder, randomBytes(s.size), s.chunk).catch(() => undefined);
              if (s.resetAt !== undefined) {
                expect((await recorder.resetError.promise).protocolCode).toBe(ErrorCode.CANCEL);
              }
            }),
          ).then(async () => {
            while (atAgent.length < p.streams.length) await afterQueuedImmediates();
            await Promise.all(
              atAgent.filter((_, i) => p.streams[i]!.resetAt === undefined).map((r) => r.ended.promise),
            );
          });
          const activity = () =>
            pair.edge.transport.sent.frames.length + pair.agent.transport.sent.frames.length;
          await withoutDeadlock(work, activity);

          // Whatever was reset, the session still carries a body of twice its window.
          const last = deferred<StreamRecorder>();
          pair.agent.events.onStreamOpened = (stream) => last.resolve(new StreamRecorder(stream, 'sync'));
          const writer = new StreamRecorder(pair.edge.session.openStream());
          writer.stream.sendHeaders(requestHead('/after'), false);
          const body = randomBytes(2 * p.sessionWindow);
          const finalWork = writeBody(writer, body, 4096).then(async () => {
            const recorder = await last.promise;
            await recorder.ended.promise;
            expect(recorder.body().equals(body)).toBe(true);
          });
          await withoutDeadlock(finalWork, activity);
          expect(pair.edge.session.closed || pair.agent.session.closed).toBe(false);
        } finally {
          pair.dispose();
        }
      }),
      { numRuns: 60 },
    );
  });
});
