import { type MuxStream, WindowBudget } from '@tunnel2/protocol';
import { addressBlock } from '../../access/address-block.js';
import { LINK_EAGER_GROWTH, LINK_GROWTH_BUDGET, LINK_MAX_STREAMS } from './link-settings.js';

/** Whom a link stream serves: each of the three may hold at most a share of one link. */
export interface LinkTenant {
  /** The tunnel's name (`tcp:<port>` for a carried TCP connection). */
  session: string;
  /**
   * Whom the session counts against, when known (agent-account.ts, as the registry records it): one token's
   * tunnels share one share, and so do all anonymous agents of one address, whatever agent keys they pick.
   */
  account: string | undefined;
  /**
   * The public client's address, as the ingress decided it (after `--trust-proxy`). Counted by its /64 when
   * it is an IPv6 address (address-block.ts): one host may use any address of its /64.
   */
  client: string;
}

/** A tenant holds at most a quarter of a link: its streams, and its streams' window growth. */
export const LINK_TENANT_STREAMS = LINK_MAX_STREAMS / 4;
export const LINK_TENANT_GROWTH = LINK_GROWTH_BUDGET / 4;

interface Share {
  streams: number;
  readonly growth: WindowBudget;
}

/**
 * One link's accounting by tenant: the streams each session, account and client address has open on it, and
 * a growth budget of each, so that none of them holds more than a quarter of the link: at most
 * LINK_TENANT_STREAMS streams (a request beyond is answered busy) and, of the bytes the link may hold,
 * LINK_TENANT_STREAMS × LINK_STREAM_WINDOW + LINK_TENANT_GROWTH = 16 + 8 = 24 MiB of its 96 MiB. Three
 * tenants that are all unread still leave a quarter of the streams and of the growth to everyone else, and
 * the session window cannot be filled at all (link-settings.ts). An entry lives while its tenant has streams.
 */
export class LinkShares {
  readonly #link: WindowBudget;
  readonly #maxStreams: number;
  readonly #maxGrowth: number;
  readonly #shares = new Map<string, Share>();
  readonly #held = new Map<MuxStream, string[]>();

  /** `link`: the link session's growth budget, which every stream's growth also draws on. */
  constructor(link: WindowBudget, maxStreams = LINK_TENANT_STREAMS, maxGrowth = LINK_TENANT_GROWTH) {
    this.#link = link;
    this.#maxStreams = maxStreams;
    this.#maxGrowth = maxGrowth;
  }

  /** True when no one of the tenant's keys has all its streams open already. */
  admits(tenant: LinkTenant): boolean {
    for (const key of keysOf(tenant))
      if ((this.#shares.get(key)?.streams ?? 0) >= this.#maxStreams) return false;
    return true;
  }

  /** Counts `stream` against its tenant's shares and takes its window growth from them (before its DATA). */
  hold(stream: MuxStream, tenant: LinkTenant): void {
    const keys = keysOf(tenant);
    const budgets: WindowBudget[] = [];
    for (const key of keys) {
      let share = this.#shares.get(key);
      if (share === undefined) {
        share = { streams: 0, growth: new WindowBudget(this.#maxGrowth) };
        this.#shares.set(key, share);
      }
      share.streams++;
      budgets.push(share.growth);
    }
    this.#held.set(stream, keys);
    budgets.push(this.#link);
    stream.useWindowBudget(new WindowBudget(Number.MAX_SAFE_INTEGER, budgets));
  }

  /**
   * Grants a held stream its eager window (LINK_EAGER_GROWTH on top of its 16 KiB, from its tenant's shares
   * and the link's budget) while no more than half the link's growth budget is taken: streams that wait
   * long without reading (long polls, slow event streams) keep their grant, so they may hold at most that
   * half, and the rest stays for windows that grow because they are read fast.
   */
  grantEager(stream: MuxStream): void {
    if (this.#link.used + LINK_EAGER_GROWTH <= this.#link.limit / 2) stream.growWindow(LINK_EAGER_GROWTH);
  }

  /** The stream closed (its growth already went back): its tenant's shares count it no more. */
  release(stream: MuxStream): void {
    const keys = this.#held.get(stream);
    if (keys === undefined) return;
    this.#held.delete(stream);
    for (const key of keys) {
      const share = this.#shares.get(key);
      if (share === undefined) continue;
      share.streams--;
      if (share.streams <= 0) this.#shares.delete(key);
    }
  }

  /** Streams `key` ('s:<session>', 'a:<account>', 'c:<client block>') has open here: for tests and metrics. */
  streamsOf(key: string): number {
    return this.#shares.get(key)?.streams ?? 0;
  }
}

function keysOf(tenant: LinkTenant): string[] {
  const keys = [`s:${tenant.session}`, `c:${addressBlock(tenant.client)}`];
  if (tenant.account !== undefined) keys.push(`a:${tenant.account}`);
  return keys;
}
