import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { buildEdge } from '../src/build-edge.js';
import { createEdgeMetrics } from '../src/operations/metrics.js';

const silent = pino({ level: 'silent' });
const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('metrics read at scrape time', () => {
  it('report window growth from the edge-wide budget, and every labelled total with each label', async () => {
    const edge = buildEdge({ port: 0, logger: silent, tcpPorts: '40000-40001' });
    const metrics = createEdgeMetrics(edge, '0.0.0-test');
    cleanups.push(() => metrics.close());
    await edge.listen();
    cleanups.push(() => edge.close(0));
    // Growth one session's stream took: the edge-wide budget is where every session's growth adds up.
    expect(edge.windowBudget.take(12_345)).toBe(12_345);
    const { body } = await metrics.render();
    expect(body).toMatch(/^tunnel2_window_growth_bytes 12345$/m);
    for (const line of [
      'tunnel2_bytes_received_total{side="public"} ',
      'tunnel2_bytes_received_total{side="agent"} ',
      'tunnel2_bytes_sent_total{side="public"} ',
      'tunnel2_bytes_sent_total{side="agent"} ',
      'tunnel2_tcp_bytes_total{direction="in"} 0',
      'tunnel2_tcp_bytes_total{direction="out"} 0',
      'tunnel2_tcp_connections_total{outcome="accepted"} 0',
    ])
      expect(body).toContain(line);
    edge.windowBudget.give(12_345);
  });
});
