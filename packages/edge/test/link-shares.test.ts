import type { MuxStream } from '@tunnel2/protocol';
import { describe, expect, it } from 'vitest';
import { LINK_EAGER_GROWTH, LINK_STREAM_WINDOW } from '../src/cluster/link/link-settings.js';
import { LinkShares, type LinkTenant } from '../src/cluster/link/link-shares.js';
import { handlerWith, linkPair, turnsUntil } from './support/link-pair.js';

const KiB = 1024;
const tenant = (session: string, client: string, account?: string): LinkTenant => ({
  session,
  client,
  account,
});

describe('LinkShares', () => {
  it('admits a tenant until one of its session, owner or client has all its streams, and again once one closes', async () => {
    const pair = await linkPair((stream) => {
      stream.handler = handlerWith();
    });
    try {
      const shares = new LinkShares(pair.ingress.windowBudget, 2, 0);
      const open = (who: LinkTenant): MuxStream => {
        const stream = pair.ingress.openStream();
        shares.hold(stream, who);
        return stream;
      };
      const first = open(tenant('shop', '10.0.0.1', 'owner-a'));
      open(tenant('shop', '10.0.0.2', 'owner-a'));
      // The session has its two; every other client of it is refused.
      expect(shares.admits(tenant('shop', '10.0.0.3'))).toBe(false);
      // So is the owner's other tunnel.
      expect(shares.admits(tenant('blog', '10.0.0.3', 'owner-a'))).toBe(false);
      // Another tunnel of another owner, from another client, is not.
      expect(shares.admits(tenant('blog', '10.0.0.3', 'owner-b'))).toBe(true);
      open(tenant('blog', '10.0.0.1', 'owner-b'));
      // 10.0.0.1 has two streams now (one per tunnel): it is refused for a third tunnel too.
      expect(shares.admits(tenant('wiki', '10.0.0.1', 'owner-c'))).toBe(false);
      first.reset(0);
      expect(shares.streamsOf('s:shop')).toBe(2);
      // The session heard the close: the accounting follows its onStreamClosed (as the link does).
      shares.release(first);
      expect(shares.streamsOf('s:shop')).toBe(1);
      expect(shares.streamsOf('c:10.0.0.1')).toBe(1);
      expect(shares.admits(tenant('shop', '10.0.0.9', 'owner-a'))).toBe(true);
    } finally {
      pair.close();
    }
  });

  it('counts every anonymous agent of one address as one account, whatever agent keys they pick (issue #29)', async () => {
    const pair = await linkPair((stream) => {
      stream.handler = handlerWith();
    });
    try {
      const shares = new LinkShares(pair.ingress.windowBudget, 2, 0);
      // Two anonymous agents (two agent keys, so two owners) from one address, each used from its own client.
      for (const who of [
        tenant('anon1', '10.0.0.1', 'addr:203.0.113.7'),
        tenant('anon2', '10.0.0.2', 'addr:203.0.113.7'),
      ])
        shares.hold(pair.ingress.openStream(), who);
      expect(shares.streamsOf('a:addr:203.0.113.7')).toBe(2);
      // A third agent of that address, from a third client: its account has all its streams.
      expect(shares.admits(tenant('anon3', '10.0.0.3', 'addr:203.0.113.7'))).toBe(false);
      // An agent of another address is admitted.
      expect(shares.admits(tenant('anon3', '10.0.0.3', 'addr:203.0.113.8'))).toBe(true);
    } finally {
      pair.close();
    }
  });

  it('counts IPv6 clients by their /64: one host cannot take a fresh address per share', async () => {
    const pair = await linkPair((stream) => {
      stream.handler = handlerWith();
    });
    try {
      const shares = new LinkShares(pair.ingress.windowBudget, 2, 0);
      shares.hold(pair.ingress.openStream(), tenant('one', '2001:db8:0:1::a'));
      shares.hold(pair.ingress.openStream(), tenant('two', '2001:db8:0:1:ffff:1:2:3'));
      expect(shares.streamsOf('c:2001:db8:0:1::/64')).toBe(2);
      expect(shares.admits(tenant('three', '2001:db8:0:1::beef'))).toBe(false);
      // Another /64, and IPv4 clients, each count alone.
      expect(shares.admits(tenant('three', '2001:db8:0:2::a'))).toBe(true);
      shares.hold(pair.ingress.openStream(), tenant('four', '10.0.0.1'));
      expect(shares.admits(tenant('five', '10.0.0.2'))).toBe(true);
    } finally {
      pair.close();
    }
  });

  it("bounds a tenant's window growth by its share, whatever the link's budget has left", async () => {
    const share = 256 * KiB;
    const body = Buffer.alloc(8 * 1024 * KiB);
    const pair = await linkPair((stream) => {
      stream.handler = {
        ...handlerWith(),
        onHeaders: () => {
          stream.write(body);
          stream.end();
        },
      };
    });
    try {
      const budget = pair.ingress.windowBudget;
      const shares = new LinkShares(budget, 100, share);
      // Three fast readers of one client, each consuming every chunk as it comes: their windows would grow
      // to 4 MiB each; the client's share holds the three to 256 KiB of growth together.
      let peak = 0;
      let done = 0;
      for (let i = 0; i < 3; i++) {
        const stream = pair.ingress.openStream();
        shares.hold(stream, tenant(`t${i}`, '10.0.0.1'));
        stream.handler = {
          ...handlerWith((chunk) => {
            peak = Math.max(peak, budget.used);
            stream.consume(chunk.length);
          }),
          onEnd: () => done++,
        };
        stream.sendHeaders(Buffer.from('head'), true);
      }
      expect(await turnsUntil(() => done === 3)).toBe(true);
      expect(peak).toBeGreaterThan(0);
      expect(peak).toBeLessThanOrEqual(share);
      // Everything went back, to the share and to the link.
      expect(budget.used).toBe(0);
      expect(LINK_STREAM_WINDOW).toBeLessThan(share);
    } finally {
      pair.close();
    }
  });

  it("takes a stream's eager window from its tenant's share: once spent, the tenant's streams start small", async () => {
    const pair = await linkPair((stream) => {
      stream.handler = handlerWith();
    });
    try {
      const shares = new LinkShares(pair.ingress.windowBudget, 100, 256 * KiB);
      const grants: number[] = [];
      for (const who of [tenant('hog', '10.0.0.1'), tenant('hog', '10.0.0.2'), tenant('hog', '10.0.0.3')]) {
        const stream = pair.ingress.openStream();
        shares.hold(stream, who);
        stream.sendHeaders(Buffer.from('head'), true);
        grants.push(stream.growWindow(LINK_EAGER_GROWTH));
      }
      expect(grants).toEqual([LINK_EAGER_GROWTH, 256 * KiB - LINK_EAGER_GROWTH, 0]);
      // Another tenant still gets its eager window from the link's budget.
      const other = pair.ingress.openStream();
      shares.hold(other, tenant('victim', '10.0.0.9'));
      other.sendHeaders(Buffer.from('head'), true);
      expect(other.growWindow(LINK_EAGER_GROWTH)).toBe(LINK_EAGER_GROWTH);
    } finally {
      pair.close();
    }
  });

  it('grants eager windows only while at most half the link growth budget is taken', async () => {
    const pair = await linkPair((stream) => {
      stream.handler = handlerWith();
    });
    try {
      const budget = pair.ingress.windowBudget;
      const shares = new LinkShares(budget);
      const opened = (): MuxStream => {
        const stream = pair.ingress.openStream();
        shares.hold(stream, tenant('shop', '10.0.0.1'));
        shares.grantEager(stream);
        return stream;
      };
      expect(opened().recvWindow).toBe(LINK_STREAM_WINDOW + LINK_EAGER_GROWTH);
      // Windows that grew by being read take the budget past half: new streams start at 16 KiB.
      budget.take(budget.limit / 2);
      expect(opened().recvWindow).toBe(LINK_STREAM_WINDOW);
    } finally {
      pair.close();
    }
  });
});
