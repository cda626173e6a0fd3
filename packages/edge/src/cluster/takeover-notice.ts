import type { IncomingMessage } from 'node:http';
import { isValidSessionName } from '../agents/session-name.js';
import { NODE_AUTH_HEADER } from '../public/cross-node.js';

// Not an `import`: an ESM import of node:http also loads Node's bundled undici (README.md, "Development").
const { request: httpRequest } = process.getBuiltinModule('node:http');

/**
 * Takeover notices: when the same agent claims its name again on another node, the claiming node tells the
 * node that held it at once, so that node closes its now superseded connection instead of serving through it
 * until its next lease renewal. This file is the notice's wire form and its sender; the receiving node's
 * route lives with the edge (it needs the session table).
 *
 * The notice is `POST /_tunnel2/node/takeover?node=<to>&name=<name>&epoch=<new epoch>&owner=<owner key>`
 * signed with the cluster secret (`NodeAuth.signNotice`, in `x-tunnel2-node-auth`). Everything it says is
 * in the signed target. It is only answered on a host that is not a tunnel's; without a signature it gets
 * the 404 every unknown path gets, with a bad one `403 TUNNEL2_ERR_NODE_AUTH_INVALID`.
 *
 * Why the notice alone may close a connection: epochs only grow, so a claim numbered above a connection's
 * epoch was granted after it and replaced its record. The receiver closes its connection for the name only
 * when that connection's epoch is below the one named: a late or replayed notice never closes a newer one.
 */
export const TAKEOVER_PATH = '/_tunnel2/node/takeover';

/** Notices on their way at once, per node; more are dropped (the renewal round still closes the old one). */
export const MAX_NOTICES_IN_FLIGHT = 64;

export interface TakeoverNotice {
  /** The node told: a notice addressed to another node is refused (never acted on by the wrong one). */
  toNode: string;
  name: string;
  /** The epoch of the claim that took the name over. */
  epoch: number;
  /** The owner key of that claim. */
  owner: string;
}

export function takeoverTarget(notice: TakeoverNotice): string {
  const query = new URLSearchParams({
    node: notice.toNode,
    name: notice.name,
    epoch: String(notice.epoch),
    owner: notice.owner,
  });
  return `${TAKEOVER_PATH}?${query.toString()}`;
}

/** The notice a (verified) target carries, or undefined when it is not one this version understands. */
export function parseTakeoverTarget(target: string): TakeoverNotice | undefined {
  const question = target.indexOf('?');
  if (question === -1 || target.slice(0, question) !== TAKEOVER_PATH) return undefined;
  const query = new URLSearchParams(target.slice(question + 1));
  const toNode = query.get('node') ?? '';
  const name = query.get('name') ?? '';
  const epochText = query.get('epoch') ?? '';
  const owner = query.get('owner') ?? '';
  const epoch = Number(epochText);
  // A session name, or a TCP port's key (`tcp:<port>`, see shared-tcp-ports.ts).
  if (toNode === '' || owner === '' || !(isValidSessionName(name) || /^tcp:\d{1,5}$/.test(name)))
    return undefined;
  if (!/^\d{1,16}$/.test(epochText) || !Number.isSafeInteger(epoch) || epoch < 1) return undefined;
  return { toNode, name, epoch, owner };
}

/** What became of notices this node sent. */
export interface NoticeCounters {
  /** The other node answered (it closed its connection, or had nothing older to close). */
  delivered: number;
  /** Unreachable, refused, or no answer in time: that node closes at its next renewal round instead. */
  failed: number;
  /** Not sent: too many on their way already. */
  dropped: number;
}

export type NoticeOutcome = keyof NoticeCounters;

/**
 * Sends notices fire-and-forget: one short-lived connection each (never queued behind forwarded traffic in
 * the hop's pool, where a long SSE stream could hold every connection), a deadline on the whole exchange,
 * and a bound on how many are on their way. Never rejects.
 */
export class NoticeSender {
  readonly counters: NoticeCounters = { delivered: 0, failed: 0, dropped: 0 };
  readonly #timeoutMs: number;
  #inFlight = 0;

  constructor(timeoutMs: number) {
    this.#timeoutMs = timeoutMs;
  }

  /** Posts a notice to `url` (the node's URL with the notice's target) signed with `signature`. */
  send(url: URL, signature: string): Promise<NoticeOutcome> {
    if (this.#inFlight >= MAX_NOTICES_IN_FLIGHT) {
      this.counters.dropped++;
      return Promise.resolve('dropped');
    }
    this.#inFlight++;
    return this.#post(url, signature).then((outcome) => {
      this.#inFlight--;
      this.counters[outcome]++;
      return outcome;
    });
  }

  #post(url: URL, signature: string): Promise<'delivered' | 'failed'> {
    return new Promise((resolve) => {
      const send = url.protocol === 'https:' ? process.getBuiltinModule('node:https').request : httpRequest;
      const req = send(url, {
        method: 'POST',
        agent: false,
        signal: AbortSignal.timeout(this.#timeoutMs),
        headers: { [NODE_AUTH_HEADER]: signature, 'content-length': '0' },
      });
      req.once('response', (res: IncomingMessage) => {
        // The answer is a few bytes; an abort after the head must not surface as an unhandled error.
        res.on('error', () => {});
        res.resume();
        resolve(res.statusCode === 200 ? 'delivered' : 'failed');
      });
      req.on('error', () => resolve('failed'));
      req.end();
    });
  }
}
