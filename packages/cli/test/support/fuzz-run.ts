import { type Agent as HttpAgent, request } from 'node:http';
import {
  ErrorCode,
  encodeFrame,
  encodeRequestHead,
  encodeResponseHead,
  FrameFlags,
  FrameType,
} from '@tunnel2/protocol';
import { FuzzAgent } from './fuzz-agent.js';
import { type Answer, helloPayload, rawFrameBytes, type Sequence } from './fuzz-model.js';

// Plays one fuzz sequence against the edge and checks what must hold whatever the agent did. Throws
// FuzzViolation (fast-check then shrinks the sequence) when the edge misbehaves.

/** What the edge may queue towards an agent that stopped reading, before it must stop answering or close. */
export const QUEUE_BOUND = 8 * 1024 * 1024;
/**
 * Interim responses a public client may see for one request: the edge's own cap (MAX_INTERIM_HEADS in
 * packages/edge/src/exchange/informational.ts); a flood of them (the model sends 2,000 or more) fails the request.
 */
export const INTERIM_BOUND = 32;
/** After its session is gone, a public request the fuzzer made settles within this (502, an abort, ...). */
const SETTLE_MS = 4_000;
/** The edge forgets a closed session within this. */
const FORGET_MS = 5_000;

const SMUGGLED = 'HTTP/1.1 200 OK\r\nx-fuzz: smuggled\r\ncontent-length: 0\r\n\r\n';

export class FuzzViolation extends Error {
  override name = 'FuzzViolation';
}

export interface EdgeState {
  sessions: Record<string, { streams: number; bufferedBytes: number }>;
  inFlight: number;
  rss: number;
  windowBudgetUsed: number;
  /** With cluster links on: the links other nodes opened to this edge, their streams and queued bytes. */
  links?: number;
  linkStreams?: number;
  linkBufferedBytes?: number;
}

export interface FuzzContext {
  url: string;
  port: number;
  statePort: number;
  /** False once the edge process exited. */
  edgeAlive(): boolean;
  stats: {
    sequences: number;
    frames: number;
    closedForProtocol: number;
    requests: number;
    floodBytes: number;
    /** Largest queue towards a paused agent the edge reported after a flood. */
    maxQueued: number;
  };
}

export async function edgeState(statePort: number): Promise<EdgeState> {
  const res = await fetch(`http://127.0.0.1:${statePort}/`);
  return (await res.json()) as EdgeState;
}

interface Outcome {
  path: string;
  status?: number;
  fuzz?: string | undefined;
  edgeError?: string | undefined;
  interim: number;
  error?: string;
}

/** A public request to the fuzz tunnel; never rejects, reports what the client saw. */
function publicRequest(port: number, name: string, path: string, agent: HttpAgent): Promise<Outcome> {
  return new Promise((resolve) => {
    let interim = 0;
    const done = (outcome: Omit<Outcome, 'path' | 'interim'>) => resolve({ path, interim, ...outcome });
    const req = request({
      host: '127.0.0.1',
      port,
      path,
      agent,
      headers: { host: `${name}.localhost:${port}` },
    });
    req.on('information', () => interim++);
    req.on('error', (err: NodeJS.ErrnoException) => done({ error: err.code ?? err.message }));
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      const fuzz = res.headers['x-fuzz'] as string | undefined;
      const edgeError = res.headers['x-tunnel2-error'] as string | undefined;
      res.on('data', () => {});
      res.on('error', (err: NodeJS.ErrnoException) =>
        done({ status, fuzz, edgeError, error: err.code ?? err.message }),
      );
      res.on('aborted', () => done({ status, fuzz, edgeError, error: 'aborted' }));
      res.on('end', () =>
        done({ status, fuzz, edgeError, ...(res.complete ? {} : { error: 'incomplete' }) }),
      );
    });
    req.end();
  });
}

const head = (status: number, headers: string[], reason = ''): Buffer =>
  encodeResponseHead({ status, statusMessage: reason, headers }, 65_536);

/** The frames an agent sends to answer the edge's stream `stream`, whose request target was `target`. */
function answerFrames(a: Answer, stream: number, target: string): Buffer[] {
  const out: Buffer[] = [];
  const interim = head(a.interimStatus, []);
  for (let i = 0; i < a.interim; i++) out.push(encodeFrame(FrameType.HEADERS, 0, stream, interim));
  const length = a.declared === undefined ? [] : ['content-length', String(a.declared)];
  switch (a.head) {
    case 'valid':
      out.push(encodeFrame(FrameType.HEADERS, 0, stream, head(200, ['x-fuzz', target, ...length], 'OK')));
      break;
    case 'malformed':
      out.push(encodeFrame(FrameType.HEADERS, 0, stream, Buffer.from([0x00, 0xc8, 0x05, 0x4f])));
      break;
    case 'crlf':
      out.push(
        encodeFrame(
          FrameType.HEADERS,
          0,
          stream,
          head(200, ['x-fuzz', `${target}\r\nx-fuzz: smuggled`, ...length]),
        ),
      );
      break;
    case 'status-101':
      out.push(
        encodeFrame(FrameType.HEADERS, 0, stream, head(101, ['x-fuzz', target, 'Upgrade', 'websocket'])),
      );
      break;
    case 'none':
      break;
  }
  const body =
    a.smuggle && a.declared !== undefined
      ? Buffer.concat([Buffer.alloc(a.declared, 'a'), Buffer.from(SMUGGLED)])
      : Buffer.alloc(a.body, 'a');
  for (let offset = 0; offset < body.length; offset += 16_384) {
    out.push(encodeFrame(FrameType.DATA, 0, stream, body.subarray(offset, offset + 16_384)));
  }
  const trailer = head(200, ['x-trailer', '1']);
  switch (a.ending) {
    case 'end':
      out.push(encodeFrame(FrameType.DATA, FrameFlags.END_STREAM, stream));
      break;
    case 'trailers':
      out.push(encodeFrame(FrameType.HEADERS, FrameFlags.END_STREAM, stream, trailer));
      break;
    case 'reset': {
      const code = Buffer.alloc(4);
      code.writeUInt32BE(ErrorCode.BACKEND_ERROR, 0);
      out.push(encodeFrame(FrameType.RESET, 0, stream, code));
      break;
    }
    case 'data-after-end':
      out.push(encodeFrame(FrameType.DATA, FrameFlags.END_STREAM, stream));
      out.push(encodeFrame(FrameType.DATA, 0, stream, Buffer.from(SMUGGLED)));
      break;
    case 'open':
      break;
  }
  return out;
}

/** One WebSocket message of back-to-back PINGs (a flood's unit; ~256 KiB). */
const pingFlood = Buffer.concat(
  Array.from({ length: 15_000 }, () => encodeFrame(FrameType.PING, 0, 0, Buffer.alloc(8))),
);
const PINGS_PER_MESSAGE = 15_000;

/** One message of HEADERS opening agent streams `first`, `first + 2`, ...: each one the edge refuses with a RESET. */
function agentStreamFlood(first: number, count: number): Buffer {
  const payload = encodeRequestHead({ method: 'GET', target: '/', headers: [] }, 65_536);
  return Buffer.concat(
    Array.from({ length: count }, (_, i) =>
      encodeFrame(FrameType.HEADERS, FrameFlags.END_STREAM, first + 2 * i, payload),
    ),
  );
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export async function runSequence(ctx: FuzzContext, seq: Sequence, httpAgent: HttpAgent): Promise<void> {
  const n = ctx.stats.sequences++;
  const name = `fuzz${n}`;
  const agent = await FuzzAgent.open(ctx.url, name);
  if (!agent.open) throw new FuzzViolation(`the edge refused agent ${name} (close ${agent.closeCode})`);

  let pending: Buffer[] = [];
  let chunk = 0;
  /** Sends what is pending as WebSocket messages cut at the sequence's chunk sizes: frames split and packed. */
  const flush = (): void => {
    if (pending.length === 0) return;
    const bytes = Buffer.concat(pending);
    pending = [];
    if (seq.chunks.length === 1 && seq.chunks[0] === 0) {
      agent.send(bytes);
      return;
    }
    for (let offset = 0; offset < bytes.length; ) {
      const size = seq.chunks[chunk++ % seq.chunks.length] ?? 1;
      agent.send(bytes.subarray(offset, offset + size));
      offset += size;
    }
  };
  const push = (frame: Buffer, count = 1): void => {
    pending.push(frame);
    ctx.stats.frames += count;
  };

  const timeoutMs = 2_000;
  const hello = (payload: Buffer): Buffer => encodeFrame(FrameType.HELLO, 0, 0, payload);
  switch (seq.hello) {
    case 'valid':
      push(hello(helloPayload(seq.settings)));
      break;
    case 'none':
      push(encodeFrame(FrameType.PING, 0, 0, Buffer.alloc(8)));
      break;
    case 'twice':
      push(hello(helloPayload(seq.settings)));
      push(hello(helloPayload(seq.settings)));
      break;
    case 'bad-version':
      push(hello(helloPayload(seq.settings, 2, 3)));
      break;
    case 'bad-setting': {
      // maxFrameSize below the protocol's 16 KiB floor; encoded by hand since resolveSettings refuses it.
      const payload = helloPayload(seq.settings);
      payload.writeUInt32BE(100, 6 + 6 + 2);
      push(hello(payload));
      break;
    }
    case 'garbage':
      push(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
      break;
    case 'silent':
      break;
  }
  flush();
  if (seq.hello === 'valid') {
    if (!(await agent.helloAck(timeoutMs))) {
      throw new FuzzViolation(`no HELLO ACK for a valid HELLO (settings ${JSON.stringify(seq.settings)})`);
    }
  } else {
    // Every other start is a session error: the edge must end the session (silent: after helloTimeoutMs).
    if (!(await agent.closedWithin(seq.hello === 'silent' ? 5_000 : timeoutMs))) {
      throw new FuzzViolation(`the edge kept a session whose start was "${seq.hello}"`);
    }
  }

  const requests: Promise<Outcome>[] = [];
  let answered = 1;
  let nextAgentStream = 2_000_002;
  for (const action of seq.actions) {
    if (!agent.open) break;
    switch (action.kind) {
      case 'frames':
        for (const frame of action.frames) push(rawFrameBytes(frame, answered));
        flush();
        break;
      case 'request': {
        const path = `/fuzz/${n}/${requests.length}`;
        ctx.stats.requests++;
        requests.push(publicRequest(ctx.port, name, path, httpAgent));
        const stream = await agent.nextEdgeStream(1_000);
        if (stream === undefined) break;
        answered = stream.id;
        const frames = answerFrames(action.answer, stream.id, stream.target);
        for (const frame of frames) push(frame);
        flush();
        break;
      }
      case 'pause':
        agent.pause();
        break;
      case 'resume':
        agent.resume();
        break;
      case 'flood': {
        agent.pause();
        const limit = action.megabytes * 1024 * 1024;
        let sent = 0;
        while (sent < limit && agent.open) {
          // An edge that stops reading a flooding agent is a fine answer: then our own buffer grows; stop there.
          if (agent.bufferedAmount > QUEUE_BOUND) break;
          const message = action.frame === 'ping' ? pingFlood : agentStreamFlood(nextAgentStream, 8_000);
          if (action.frame === 'agent-stream') nextAgentStream += 16_000;
          agent.send(message);
          ctx.stats.frames += action.frame === 'ping' ? PINGS_PER_MESSAGE : 8_000;
          sent += message.length;
          await turn();
        }
        ctx.stats.floodBytes += sent;
        // The edge may still be reading the flood: watch its queue until it stops growing (bounded).
        let queued = 0;
        for (let i = 0, last = -1; i < 50 && queued !== last; i++) {
          last = queued;
          if (i > 0) await new Promise((resolve) => setTimeout(resolve, 20));
          queued = Math.max(queued, (await edgeState(ctx.statePort)).sessions[name]?.bufferedBytes ?? 0);
          if (queued > QUEUE_BOUND) break;
        }
        ctx.stats.maxQueued = Math.max(ctx.stats.maxQueued, queued);
        if (queued > QUEUE_BOUND) {
          throw new FuzzViolation(
            `the edge queued ${queued} bytes of answers to an agent that stopped reading (${action.frame} flood of ${sent} bytes); bound ${QUEUE_BOUND}`,
          );
        }
        break;
      }
    }
  }
  if (agent.edgeFrameError !== undefined) {
    throw new FuzzViolation(`the edge sent bytes that are not frames: ${agent.edgeFrameError.message}`);
  }
  if (agent.closeCode === 1002) ctx.stats.closedForProtocol++;

  // The session ends (as a crashed agent's would); every public request must then settle, promptly.
  await agent.terminate();
  let timer: NodeJS.Timeout | undefined;
  const settled = await Promise.race([
    Promise.all(requests),
    new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), SETTLE_MS);
    }),
  ]);
  clearTimeout(timer);
  if (settled === undefined)
    throw new FuzzViolation(`a public request hung ${SETTLE_MS} ms after its session ended`);
  for (const outcome of settled) checkOutcome(outcome);

  const deadline = Date.now() + FORGET_MS;
  while ((await edgeState(ctx.statePort)).sessions[name] !== undefined) {
    if (Date.now() > deadline)
      throw new FuzzViolation(`the edge still holds session ${name} ${FORGET_MS} ms after it closed`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  if (!ctx.edgeAlive()) throw new FuzzViolation('the edge process exited');
}

/** What a public client may see: the agent's own response for this very request, or the edge's error. */
function checkOutcome(outcome: Outcome): void {
  if (outcome.fuzz === 'smuggled' || (outcome.fuzz !== undefined && outcome.fuzz !== outcome.path)) {
    throw new FuzzViolation(
      `a public client got a response that is not its own: ${outcome.path} saw x-fuzz ${JSON.stringify(outcome.fuzz)}`,
    );
  }
  if (outcome.status !== undefined && outcome.fuzz === undefined && outcome.edgeError === undefined) {
    throw new FuzzViolation(
      `a public client got status ${outcome.status} for ${outcome.path} from neither its agent nor the edge's error path`,
    );
  }
  if (outcome.interim > INTERIM_BOUND) {
    throw new FuzzViolation(
      `a public client got ${outcome.interim} interim responses for ${outcome.path}; bound ${INTERIM_BOUND}`,
    );
  }
}
