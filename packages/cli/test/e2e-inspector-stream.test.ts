import { once } from 'node:events';
import { createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildEdge } from '@tunnel2/edge';
import type { EntrySummary, InFlightExchange } from '@tunnel2/inspector';
import { describe, expect, it } from 'vitest';
import { connect } from '../src/index.js';
import { silent } from './support/stack.js';

const BODY_LIMIT = 4096;

/** An SSE backend that never ends: the next event is written as soon as the last one was taken. */
async function endlessEvents(): Promise<{ port: number; gone: Promise<void>; close(): Promise<void> }> {
  let left: () => void = () => {};
  const gone = new Promise<void>((resolve) => {
    left = resolve;
  });
  const server = createServer((_req, res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    let i = 0;
    const next = (): void => {
      if (res.destroyed) return;
      res.write(`data: ${String(i++).padStart(6, '0')} ${'x'.repeat(1000)}\n\n`, next);
    };
    res.on('close', left);
    next();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    gone,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The next `event: <name>` of an SSE response, parsed. */
async function nextEvent(res: IncomingMessage, name: string): Promise<unknown> {
  let buffer = '';
  for await (const chunk of res) {
    buffer += String(chunk);
    for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (new RegExp(`^event: ${name}$`, 'm').test(block)) {
        return JSON.parse(/^data: (.*)$/m.exec(block)![1]!);
      }
    }
  }
  throw new Error(`the event stream ended before an ${name} event`);
}

describe('inspector: a response that never ends (SSE through the tunnel)', () => {
  it('is listed in flight with its bytes so far, keeps only the body limit, and is an entry once the client leaves', async () => {
    const backend = await endlessEvents();
    const edge = buildEdge({ port: 0, logger: silent });
    const { port } = await edge.listen();
    const tunnel = await connect({
      target: backend.port,
      server: edge.url,
      subdomain: 'sse',
      inspect: { port: 0, bodyLimit: BODY_LIMIT },
    });
    const api = async <T>(path: string): Promise<T> =>
      (await (await fetch(`${tunnel.inspectorUrl}${path}`)).json()) as T;
    try {
      const client = request({
        port,
        host: '127.0.0.1',
        path: '/events',
        headers: { host: `sse.localhost:${port}` },
      });
      client.on('error', () => {});
      client.end();
      const [res] = (await once(client, 'response')) as [IncomingMessage];
      // Twenty times the body limit, then the client stops reading (the stream stays open: backpressure).
      let read = 0;
      await new Promise<void>((resolve) => {
        res.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read <= 20 * BODY_LIMIT) return;
          res.pause();
          resolve();
        });
      });
      const { exchanges } = await api<{ exchanges: InFlightExchange[] }>('/api/inflight');
      expect(exchanges).toHaveLength(1);
      expect(exchanges[0]).toMatchObject({ method: 'GET', path: '/events', status: 200, kind: 'http' });
      expect(exchanges[0]!.responseBytes).toBeGreaterThan(20 * BODY_LIMIT);
      const status = await api<{ inFlight: number; count: number; bytes: number }>('/api/status');
      expect(status).toMatchObject({ inFlight: 1, count: 0 });
      // What the running stream holds of the budget is its kept prefix, whatever it has sent.
      expect(status.bytes).toBeLessThanOrEqual(BODY_LIMIT);

      const events = request(`${tunnel.inspectorUrl}/api/events`);
      events.end();
      const [eventsRes] = (await once(events, 'response')) as [IncomingMessage];
      const stored = nextEvent(eventsRes, 'entry');
      res.destroy();
      const entry = (await stored) as EntrySummary;
      await backend.gone;
      eventsRes.destroy();
      expect(entry).toMatchObject({ path: '/events', status: 200 });
      expect(entry.error?.code).toMatch(/client_went_away|stream_reset/);
      const full = await api<{ responseBody: { captured: number; size: number; truncated: boolean } }>(
        `/api/entries/${entry.id}`,
      );
      expect(full.responseBody).toMatchObject({ captured: BODY_LIMIT, truncated: true });
      expect(full.responseBody.size).toBeGreaterThan(20 * BODY_LIMIT);
      expect((await api<{ exchanges: unknown[] }>('/api/inflight')).exchanges).toHaveLength(0);
    } finally {
      await tunnel.close(0);
      await edge.close(0);
      await backend.close();
    }
  });
});
