import { describe, expect, it } from 'vitest';
import { mergeWorkerMetrics } from '../src/index.js';

// The primary of `--workers N` answers /metrics with every worker's exposition merged: each sample labelled
// with its worker, each family's HELP and TYPE once, its samples together (the text format's rule).

const worker = (requests: number): string =>
  [
    '# HELP tunnel2_http_requests_total Public requests',
    '# TYPE tunnel2_http_requests_total counter',
    `tunnel2_http_requests_total{class="2xx"} ${requests}`,
    '# HELP tunnel2_sessions_connected Agents',
    '# TYPE tunnel2_sessions_connected gauge',
    'tunnel2_sessions_connected 1',
    '# HELP tunnel2_up Always 1',
    '# TYPE tunnel2_up gauge',
    'tunnel2_up{} 1',
    '',
  ].join('\n');

describe('mergeWorkerMetrics', () => {
  it("labels every sample with its worker and keeps each family's lines together", () => {
    const merged = mergeWorkerMetrics([
      { worker: 0, body: worker(5) },
      { worker: 1, body: worker(7) },
    ]);
    expect(merged).toBe(
      [
        '# HELP tunnel2_http_requests_total Public requests',
        '# TYPE tunnel2_http_requests_total counter',
        'tunnel2_http_requests_total{worker="0",class="2xx"} 5',
        'tunnel2_http_requests_total{worker="1",class="2xx"} 7',
        '# HELP tunnel2_sessions_connected Agents',
        '# TYPE tunnel2_sessions_connected gauge',
        'tunnel2_sessions_connected{worker="0"} 1',
        'tunnel2_sessions_connected{worker="1"} 1',
        '# HELP tunnel2_up Always 1',
        '# TYPE tunnel2_up gauge',
        'tunnel2_up{worker="0"} 1',
        'tunnel2_up{worker="1"} 1',
        '',
      ].join('\n'),
    );
  });
});
