import { MuxSession, type MuxStream, type StreamHandler, WindowBudget } from '@tunnel2/protocol';
import { linkSessionOptions } from '../../src/cluster/link/link-settings.js';

/** The two ends of a node link with the link's settings, wired to each other in memory (no socket). */
export interface LinkPair {
  /** The forwarding node's end: it opens the streams. */
  ingress: MuxSession;
  /** The accepting node's end: `serve` handles each stream the ingress opens. */
  holder: MuxSession;
  close(): void;
}

/** A handler that ignores everything, with `onData` of the caller's. */
export function handlerWith(onData: (chunk: Buffer) => void = () => {}): StreamHandler {
  return { onHeaders: () => {}, onData, onEnd: () => {}, onReset: () => {}, onDrain: () => {} };
}

/** Lets the event loop turn until `done()` holds, or a bounded number of turns passed; returns `done()`. */
export async function turnsUntil(done: () => boolean): Promise<boolean> {
  for (let turn = 0; turn < 100_000 && !done(); turn++) await new Promise((resolve) => setImmediate(resolve));
  return done();
}

/** Both HELLOs exchanged; `serve` gets each stream the ingress opens (on its head). */
export async function linkPair(serve: (stream: MuxStream) => void): Promise<LinkPair> {
  let ingress: MuxSession | undefined;
  let holder: MuxSession | undefined;
  // Delivered at once: a message is decoded before its memory is released (`done`).
  const wire = (to: () => MuxSession | undefined) => ({
    send: (message: Buffer, done: () => void) => {
      to()?.receive(message);
      done();
    },
    close: () => {},
  });
  const noHandler = { onHello: () => {}, onClose: () => {} };
  ingress = new MuxSession({
    ...linkSessionOptions('edge', {}, new WindowBudget(Number.MAX_SAFE_INTEGER)),
    transport: wire(() => holder),
    handler: noHandler,
  });
  holder = new MuxSession({
    ...linkSessionOptions('agent', {}, new WindowBudget(Number.MAX_SAFE_INTEGER)),
    transport: wire(() => ingress),
    handler: { ...noHandler, onStream: serve },
  });
  holder.sendHello({}, false);
  await new Promise((resolve) => setImmediate(resolve));
  ingress.sendHello({}, true);
  const both = [ingress, holder];
  return {
    ingress,
    holder,
    close: () => {
      for (const session of both) session.transportClosed();
    },
  };
}
