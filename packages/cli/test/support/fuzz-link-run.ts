import {
  ErrorCode,
  encodeFrame,
  encodeRequestHead,
  encodeTcpHead,
  FrameFlags,
  FrameType,
} from '@tunnel2/protocol';
import type { NodeAuth } from '../../../edge/src/cluster/node-auth.js';
import type { LinkAction, LinkHead, LinkSequence } from './fuzz-link-model.js';
import { helloPayload, rawFrameBytes } from './fuzz-model.js';
import { FuzzNode } from './fuzz-node.js';
import { edgeState, FuzzViolation, QUEUE_BOUND } from './fuzz-run.js';

// Plays one link fuzz sequence against the target node and checks what must hold whatever a peer node that
// knows the secret does: its HELLO proves the secret back, a bad start ends the link, nothing it sends is
// answered with bytes that are not frames, what it queues towards a peer that stops reading stays bounded,
// and once the link is gone the target holds nothing of it (no link, no link stream, nothing in flight).

export const LINK_PATH = '/_tunnel2/node-link';
const AUTH_HEADER = 'x-tunnel2-node-auth';
const SESSION_HEADER = 'x-tunnel2-link-session';
const CLIENT_HEADER = 'x-tunnel2-link-client';
/** The fuzzer's node id, as it signs its links. */
export const FUZZ_NODE = 'node-fuzz';
/** After the link is gone, the target lets go of it within this. */
const FORGET_MS = 5_000;

export interface LinkFuzzContext {
  url: string;
  statePort: number;
  /** The target's node id (the links are signed for it). */
  targetNode: string;
  /** The cluster secret's signer: the fuzzer is a node as far as the target can tell. */
  auth: NodeAuth;
  /** The session the target's own agent holds (link requests for it reach a real backend). */
  steady: string;
  edgeAlive(): boolean;
  stats: {
    links: number;
    frames: number;
    streams: number;
    responses: number;
    resets: number;
    closedByTarget: number;
    floodBytes: number;
    maxQueued: number;
  };
}

function head(kind: LinkHead, target: string, steady: string): Buffer {
  const request = (headers: string[]): Buffer =>
    encodeRequestHead({ method: 'GET', target, headers }, 65_536);
  switch (kind) {
    case 'steady':
      return request(['host', `${steady}.localhost`, SESSION_HEADER, steady, CLIENT_HEADER, '203.0.113.9']);
    case 'unknown':
      return request(['host', 'x.localhost', SESSION_HEADER, 'nobody-here', CLIENT_HEADER, '203.0.113.9']);
    case 'no-meta':
      return request(['host', `${steady}.localhost`]);
    case 'meta-first':
      return request([SESSION_HEADER, steady, CLIENT_HEADER, '203.0.113.9', 'host', `${steady}.localhost`]);
    case 'tcp':
      return encodeTcpHead({ port: 40_000, clientAddress: '203.0.113.9', clientPort: 5_000 });
    case 'garbage':
      return Buffer.from('GET / HTTP/1.1\r\n\r\n');
  }
}

const reset = (stream: number): Buffer => {
  const code = Buffer.alloc(4);
  code.writeUInt32BE(ErrorCode.CANCEL, 0);
  return encodeFrame(FrameType.RESET, 0, stream, code);
};

/** One message of back-to-back PINGs (~256 KiB). */
const PINGS_PER_MESSAGE = 15_000;
const pingFlood = Buffer.concat(
  Array.from({ length: PINGS_PER_MESSAGE }, () => encodeFrame(FrameType.PING, 0, 0, Buffer.alloc(8))),
);

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export async function runLinkSequence(ctx: LinkFuzzContext, seq: LinkSequence): Promise<void> {
  ctx.stats.links++;
  const host = new URL(ctx.url).host;
  const signed = ctx.auth.signLink(FUZZ_NODE, ctx.targetNode, host);
  const node = await FuzzNode.open(ctx.url, LINK_PATH, { host, [AUTH_HEADER]: signed.value });
  if (!node.open)
    throw new FuzzViolation(`the target refused a correctly signed link (close ${node.closeCode})`);
  try {
    await play(ctx, seq, node, signed.nonce);
  } finally {
    await node.terminate();
  }
  if (node.targetFrameError !== undefined)
    throw new FuzzViolation(`the target sent bytes that are not frames: ${node.targetFrameError.message}`);
  ctx.stats.responses += node.answered.size;
  ctx.stats.resets += node.resets;
  // The link is gone: the target must let go of everything it held for it.
  const deadline = Date.now() + FORGET_MS;
  for (;;) {
    const state = await edgeState(ctx.statePort);
    if (state.links === 0 && state.linkStreams === 0 && state.inFlight === 0) break;
    if (Date.now() > deadline)
      throw new FuzzViolation(
        `${FORGET_MS} ms after its link went, the target still holds ${state.links} links, ${state.linkStreams} link streams, ${state.inFlight} requests in flight`,
      );
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  if (!ctx.edgeAlive()) throw new FuzzViolation('the target process exited');
}

async function play(ctx: LinkFuzzContext, seq: LinkSequence, node: FuzzNode, nonce: string): Promise<void> {
  if (!(await node.until(() => node.hello !== undefined, 2_000)))
    throw new FuzzViolation('no HELLO from the target on a correctly signed link');
  if (!ctx.auth.checkLinkProof(node.hello?.meta.linkProof, FUZZ_NODE, ctx.targetNode, nonce))
    throw new FuzzViolation(
      `the target's HELLO does not prove the secret: ${JSON.stringify(node.hello?.meta)}`,
    );

  let pending: Buffer[] = [];
  let chunk = 0;
  const flush = (): void => {
    if (pending.length === 0) return;
    const bytes = Buffer.concat(pending);
    pending = [];
    if (seq.chunks.length === 1 && seq.chunks[0] === 0) {
      node.send(bytes);
      return;
    }
    for (let offset = 0; offset < bytes.length; ) {
      const size = seq.chunks[chunk++ % seq.chunks.length] ?? 1;
      node.send(bytes.subarray(offset, offset + size));
      offset += size;
    }
  };
  const push = (frame: Buffer, count = 1): void => {
    pending.push(frame);
    ctx.stats.frames += count;
  };

  const hello = (payload: Buffer, flags = FrameFlags.ACK): Buffer =>
    encodeFrame(FrameType.HELLO, flags, 0, payload);
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
    case 'garbage':
      push(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
      break;
    case 'silent':
      break;
  }
  flush();
  if (seq.hello !== 'valid') {
    // The target's helloTimeoutMs is 500 ms in the test; every other start is a session error.
    if (!(await node.closedWithin(seq.hello === 'silent' ? 5_000 : 2_000)))
      throw new FuzzViolation(`the target kept a link whose start was "${seq.hello}"`);
    ctx.stats.closedByTarget++;
    return;
  }

  let nextStream = 1;
  let answered = 1;
  for (const action of seq.actions) {
    if (!node.open) break;
    await act(ctx, action);
  }
  if (!node.open) ctx.stats.closedByTarget++;

  async function act(ctx: LinkFuzzContext, action: LinkAction): Promise<void> {
    switch (action.kind) {
      case 'frames':
        for (const frame of action.frames) push(rawFrameBytes(frame, answered));
        flush();
        return;
      case 'open': {
        const id = nextStream;
        nextStream += 2;
        answered = id;
        ctx.stats.streams++;
        const empty = action.body === 0 && action.ending === 'end';
        push(
          encodeFrame(
            FrameType.HEADERS,
            empty ? FrameFlags.END_STREAM : 0,
            id,
            head(action.head, action.target, ctx.steady),
          ),
        );
        for (let sent = 0; sent < action.body; sent += 16_384)
          push(encodeFrame(FrameType.DATA, 0, id, Buffer.alloc(Math.min(16_384, action.body - sent), 'b')));
        if (!empty && action.ending === 'end') push(encodeFrame(FrameType.DATA, FrameFlags.END_STREAM, id));
        if (action.ending === 'reset') push(reset(id));
        flush();
        // A complete request for the steady session is served (unless earlier frames broke the link, or
        // its settings leave the target no room): waiting for its head keeps requests in the mix, not only
        // frames the target refuses.
        if (action.head === 'steady' && action.ending === 'end')
          await node.until(() => node.answered.has(id), 1_000);
        return;
      }
      case 'rapid-reset': {
        const opened = head('steady', '/loadtest/ping', ctx.steady);
        for (let i = 0; i < action.count; i++) {
          push(encodeFrame(FrameType.HEADERS, FrameFlags.END_STREAM, nextStream, opened));
          push(reset(nextStream));
          nextStream += 2;
        }
        ctx.stats.streams += action.count;
        flush();
        return;
      }
      case 'pause':
        node.pause();
        return;
      case 'resume':
        node.resume();
        return;
      case 'ping-flood': {
        node.pause();
        const limit = action.megabytes * 1024 * 1024;
        let sent = 0;
        while (sent < limit && node.open && node.bufferedAmount <= QUEUE_BOUND) {
          node.send(pingFlood);
          ctx.stats.frames += PINGS_PER_MESSAGE;
          sent += pingFlood.length;
          await turn();
        }
        ctx.stats.floodBytes += sent;
        // The target may still be reading the flood: watch its queue until it stops growing (bounded).
        let queued = 0;
        for (let i = 0, last = -1; i < 50 && queued !== last; i++) {
          last = queued;
          if (i > 0) await new Promise((resolve) => setTimeout(resolve, 20));
          queued = Math.max(queued, (await edgeState(ctx.statePort)).linkBufferedBytes ?? 0);
          if (queued > QUEUE_BOUND) break;
        }
        ctx.stats.maxQueued = Math.max(ctx.stats.maxQueued, queued);
        if (queued > QUEUE_BOUND)
          throw new FuzzViolation(
            `the target queued ${queued} bytes of answers to a peer node that stopped reading; bound ${QUEUE_BOUND}`,
          );
        return;
      }
    }
  }
}
