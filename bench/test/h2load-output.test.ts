import { describe, expect, it } from 'vitest';
import { parseH2loadOutput } from '../src/measure/h2load-runner.js';

// h2load 1.52 (Debian bookworm's nghttp2-client) as `pnpm bench h2` reads it: the summary, not the progress.
const OK = `starting benchmark...
spawning thread #0: 2 total client(s). 200 total requests
Application protocol: h2c
progress: 100% done

finished in 57.06ms, 3504.96 req/s, 107.51KB/s
requests: 200 total, 200 started, 200 done, 200 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 200 2xx, 0 3xx, 0 4xx, 0 5xx
traffic: 6.13KB (6282) total, 446B (446) headers (space savings 94.81%), 400B (400) data
                     min         max         mean         sd        +/- sd
time for request:      303us      9.44ms      1.08ms      1.33ms    92.00%
time for connect:       90us       222us       156us        92us   100.00%
`;

describe('parseH2loadOutput', () => {
  it('reads requests, answers, data bytes, the elapsed time in any unit and the request times', () => {
    expect(parseH2loadOutput(OK)).toEqual({
      durationSec: 0.05706,
      requests: 200,
      ok: 200,
      errors: {},
      latencyMs: { p50: null, p99: null, mean: 1.08, max: 9.44 },
      bytes: 400,
      missedSlots: null,
    });
    expect(parseH2loadOutput(OK.replace('57.06ms', '10.00s')).durationSec).toBe(10);
  });

  it('counts non-2xx answers by class and streams without an answer as resets or timeouts', () => {
    const failed = OK.replace(
      '200 done, 200 succeeded, 0 failed, 0 errored, 0 timeout',
      '200 done, 190 succeeded, 10 failed, 6 errored, 2 timeout',
    ).replace('200 2xx, 0 3xx, 0 4xx, 0 5xx', '190 2xx, 0 3xx, 0 4xx, 4 5xx');
    const load = parseH2loadOutput(failed);
    expect(load.ok).toBe(190);
    expect(load.errors).toEqual({ http_5xx: 4, timeout: 2, reset: 4 });
  });

  it('counts an answer only once its stream completed (a 2xx head whose stream the duration cut is not one)', () => {
    const cut = OK.replace('200 done, 200 succeeded', '198 done, 198 succeeded');
    expect(parseH2loadOutput(cut)).toMatchObject({ requests: 198, ok: 198, errors: {} });
  });

  it('fails with the tail of what h2load printed when there is no summary', () => {
    expect(() => parseH2loadOutput('connect to 127.0.0.1 port 1 failed')).toThrow(/printed no summary/);
  });
});
