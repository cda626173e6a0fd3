import { DEFAULT_BATCH_SIZE } from '@tunnel2/registry/redis';
import { readCpuMs } from '../measure/process-stats.js';
import type { RedisServer } from '../stacks/redis-server.js';

/**
 * What idle sessions cost the Redis registry, for `pnpm bench sessions --registry redis`: the edge runs in
 * cluster mode against a real redis-server, and Redis is read (INFO all, its /proc CPU) and the edge's
 * registry metric is scraped before the sessions connect, once they are all open, and after the idle period.
 */
export interface SessionsRedisResult {
  /** The edge's `--lease-ttl-ms`, in s. */
  leaseTtlSec: number;
  /** The edge renews every lease it holds once per third of the lease (SessionTable, one timer per node). */
  renewIntervalSec: number;
  /** `renewMany` calls the edge finished during the idle period (its registry operation metric). */
  renewalRounds: number;
  /** Leases per pipelined batch in the Redis registry's renewMany (its DEFAULT_BATCH_SIZE; the edge keeps it). */
  renewBatchSize: number;
  /** renewalRounds × ⌈sessions / renewBatchSize⌉: one round trip per pipelined batch. */
  roundTrips: number;
  roundTripsPerSessionPerLease: number;
  /**
   * Socket reads Redis made during the idle period (INFO stats total_reads_processed), the bench's own INFO
   * excluded. Every round trip needs at least one read, so this bounds the round trips from above by
   * measurement alone (a pipeline of 1,000 scripts arrives in several reads).
   */
  socketReads: number;
  socketReadsPerSessionPerLease: number;
  /** Replies Redis wrote during the idle period (total_writes_processed), the bench's INFO excluded. */
  socketWrites: number;
  /** Commands Redis executed while idle (commandstats; commands run inside a Lua script count too). */
  commands: number;
  commandsByName: Record<string, number>;
  commandsPerSessionPerRound: number;
  commandsPerSessionPerLease: number;
  /** EVALSHA/EVAL calls per session per round: one renew script each. */
  scriptCallsPerSessionPerRound: number;
  /** Commands per session while they connected (the claim script and what runs inside it). */
  connectCommandsPerSession: number;
  usedMemoryBeforeMb: number;
  usedMemoryAfterMb: number;
  /** (used_memory after − before) / sessions. */
  bytesPerSession: number;
  /** redis-server's RSS after the idle period (used_memory_rss). */
  redisRssAfterMb: number;
  /** redis-server CPU while the sessions connected, per claim. */
  redisConnectCpuUsPerSession: number;
  /** redis-server CPU over the idle period, per second: the lease upkeep. */
  redisIdleCpuMsPerSec: number;
}

/**
 * The edge renews every third of the lease (session-table.ts; its 250 ms floor is below the bench's shortest
 * lease, 1 s), each round one renewMany in pipelined batches of the registry's DEFAULT_BATCH_SIZE.
 */
const RENEWALS_PER_LEASE = 3;
const RENEW_METRIC = 'tunnel2_registry_operation_duration_seconds_count{operation="renewMany"}';

interface Snapshot {
  info: Map<string, string>;
  cpuMs: number;
  renewRounds: number;
}

export interface RedisProbe {
  snapshot(): Promise<Snapshot>;
}

async function renewRounds(adminUrl: string): Promise<number> {
  const res = await fetch(`${adminUrl}/metrics`);
  const text = await res.text();
  const line = text.split('\n').find((l) => l.startsWith(RENEW_METRIC));
  // The series appears with the first renewal round.
  return line === undefined ? 0 : Number(line.slice(RENEW_METRIC.length).trim());
}

export function redisProbe(redis: RedisServer, edgeAdminUrl: string): RedisProbe {
  return {
    async snapshot() {
      const [info, rounds] = await Promise.all([redis.info(), renewRounds(edgeAdminUrl)]);
      return { info, cpuMs: readCpuMs(redis.pid) ?? Number.NaN, renewRounds: rounds };
    },
  };
}

const num = (s: Snapshot, key: string): number => Number(s.info.get(key) ?? Number.NaN);

/** Calls per command from `cmdstat_<name>:calls=<n>,...` lines. */
function callsByCommand(s: Snapshot): Map<string, number> {
  const calls = new Map<string, number>();
  for (const [key, value] of s.info) {
    if (!key.startsWith('cmdstat_')) continue;
    const match = /(?:^|,)calls=(\d+)/.exec(value);
    if (match !== null) calls.set(key.slice('cmdstat_'.length), Number(match[1]));
  }
  return calls;
}

/** Commands run between two snapshots, by name, the bench's own INFO left out (reported separately). */
function commandsBetween(from: Snapshot, to: Snapshot): { byName: Record<string, number>; info: number } {
  const before = callsByCommand(from);
  const byName: Record<string, number> = {};
  let info = 0;
  for (const [name, calls] of callsByCommand(to)) {
    const delta = calls - (before.get(name) ?? 0);
    if (delta <= 0) continue;
    if (name === 'info') info = delta;
    else byName[name] = delta;
  }
  return { byName, info };
}

const sum = (byName: Record<string, number>): number => Object.values(byName).reduce((a, b) => a + b, 0);

/**
 * @param start before the sessions connected; @param connected once all were open; @param idle after the
 * idle period of `idleSec`.
 */
export function redisCosts(
  snapshots: { start: Snapshot; connected: Snapshot; idle: Snapshot },
  sessions: number,
  idleSec: number,
  leaseTtlSec: number,
): SessionsRedisResult {
  const { start, connected, idle } = snapshots;
  const renewIntervalSec = leaseTtlSec / RENEWALS_PER_LEASE;
  const rounds = idle.renewRounds - connected.renewRounds;
  const idleCommands = commandsBetween(connected, idle);
  const commands = sum(idleCommands.byName);
  const perSessionPerRound = (n: number): number =>
    sessions > 0 && rounds > 0 ? n / sessions / rounds : Number.NaN;
  const roundTrips = rounds * Math.ceil(sessions / DEFAULT_BATCH_SIZE);
  // Each INFO the bench sent is one read and one write of Redis's own.
  const socketReads =
    num(idle, 'total_reads_processed') - num(connected, 'total_reads_processed') - idleCommands.info;
  const socketWrites =
    num(idle, 'total_writes_processed') - num(connected, 'total_writes_processed') - idleCommands.info;
  const scriptCalls = (idleCommands.byName.evalsha ?? 0) + (idleCommands.byName.eval ?? 0);
  const usedBefore = num(start, 'used_memory');
  const usedAfter = num(idle, 'used_memory');
  const mb = (bytes: number): number => bytes / 2 ** 20;
  return {
    leaseTtlSec,
    renewIntervalSec,
    renewalRounds: rounds,
    renewBatchSize: DEFAULT_BATCH_SIZE,
    roundTrips,
    roundTripsPerSessionPerLease: perSessionPerRound(roundTrips) * RENEWALS_PER_LEASE,
    socketReads,
    socketReadsPerSessionPerLease: perSessionPerRound(socketReads) * RENEWALS_PER_LEASE,
    socketWrites,
    commands,
    commandsByName: idleCommands.byName,
    commandsPerSessionPerRound: perSessionPerRound(commands),
    commandsPerSessionPerLease: perSessionPerRound(commands) * RENEWALS_PER_LEASE,
    scriptCallsPerSessionPerRound: perSessionPerRound(scriptCalls),
    connectCommandsPerSession:
      sessions > 0 ? sum(commandsBetween(start, connected).byName) / sessions : Number.NaN,
    usedMemoryBeforeMb: mb(usedBefore),
    usedMemoryAfterMb: mb(usedAfter),
    bytesPerSession: sessions > 0 ? (usedAfter - usedBefore) / sessions : Number.NaN,
    redisRssAfterMb: mb(num(idle, 'used_memory_rss')),
    redisConnectCpuUsPerSession:
      sessions > 0 ? ((connected.cpuMs - start.cpuMs) * 1000) / sessions : Number.NaN,
    redisIdleCpuMsPerSec: (idle.cpuMs - connected.cpuMs) / idleSec,
  };
}
