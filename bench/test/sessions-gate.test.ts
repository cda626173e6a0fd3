import { describe, expect, it } from 'vitest';
import { sessionsGate } from '../src/runs/standalone-scenarios.js';
import type { SessionsRedisResult } from '../src/scenarios/sessions-redis.js';
import type { SessionsResult } from '../src/scenarios/sessions-scenario.js';

// What fails `pnpm bench sessions`, on results shaped like real runs'.

function result(streams: Partial<SessionsResult['streams']>): SessionsResult {
  return {
    scenario: 'sessions',
    registry: 'memory',
    sessions: {
      requested: 10_000,
      opened: 10_000,
      lostWhileIdle: 0,
      connectSec: 5.4,
      claimsPerSec: 1850,
      idleSec: 15,
      edgeRssBeforeMb: 91,
      edgeRssAfterMb: 239,
      edgePeakRssMb: 240,
      edgeKbPerSession: 15.2,
      edgeIdleCpuMsPerSec: 57,
    },
    streams: {
      requested: 1000,
      maxConcurrent: 1000,
      answered: 1000,
      wrong: 0,
      failed: 0,
      durationMs: 4400,
      ...streams,
    },
    redis: null,
  };
}

describe('sessions gate', () => {
  it('passes a run where every stream was open at once and answered right', () => {
    expect(sessionsGate(result({}), 30)).toEqual({ passed: true, violations: [] });
  });

  it('fails a run whose streams were all answered but never all open at once', () => {
    // A run that passed before this check: the agent answered the first 512 before the rest arrived.
    expect(sessionsGate(result({ maxConcurrent: 512 }), null)).toEqual({
      passed: false,
      violations: ['streams: at most 512 of 1000 were open at once'],
    });
  });

  it('names a lost or mixed-up stream and a session over the memory budget', () => {
    const gate = sessionsGate(result({ answered: 999, failed: 1, wrong: 2 }), 10);
    expect(gate.violations).toEqual([
      '15.2 KB of edge RSS per session > 10',
      'streams: 999/1000 answered, 2 wrong, 1 failed',
    ]);
  });

  it('fails a Redis run that saw no renewal round, or more than one socket read per session per lease', () => {
    const redis = (r: Partial<SessionsRedisResult>): SessionsResult => ({
      ...result({}),
      registry: 'redis',
      redis: { renewalRounds: 4, socketReadsPerSessionPerLease: 0.03, ...r } as SessionsRedisResult,
    });
    expect(sessionsGate(redis({}), null).passed).toBe(true);
    expect(sessionsGate(redis({ renewalRounds: 0 }), null).violations).toEqual([
      'redis: no lease renewal round finished while idle',
    ]);
    expect(sessionsGate(redis({ socketReadsPerSessionPerLease: 3 }), null).violations).toEqual([
      'redis: 3.000 socket reads per session per lease > 1',
    ]);
  });
});
