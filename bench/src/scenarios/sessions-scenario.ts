import { request } from 'node:http';
import { decodeRequestHead, ErrorCode, encodeResponseHead, type MuxStream } from '@tunnel2/protocol';
import { freePort } from '@tunnel2/test-services';
import { readCpuMs, readStatusKb } from '../measure/process-stats.js';
import { startEdgeService } from '../stacks/bench-stack.js';
import type { ChildService } from '../stacks/child-service.js';
import { clusterNodeArgs } from '../stacks/cluster-stack.js';
import { connectLightAgent, type LightAgent } from '../stacks/light-agent.js';
import { type RedisServer, startRedisServer } from '../stacks/redis-server.js';
import { type RedisProbe, redisCosts, redisProbe, type SessionsRedisResult } from './sessions-redis.js';

/**
 * `pnpm bench sessions`: what one edge pays per idle agent session, and whether one session carries
 * 1,000 concurrent streams with every answer matched to its request. The agents are light in-process
 * agents (one WebSocket + one protocol session each, see light-agent.ts), so 10,000 of them fit in the
 * bench process; the edge is the real `tunnel2 server`, its own process, measured through /proc.
 */
export interface SessionsSettings {
  sessions: number;
  /** Sessions opened at once while connecting (the rest wait their turn). */
  connectConcurrency: number;
  /** How long the sessions stay idle before the edge's memory is read (heartbeats run meanwhile). */
  idleSec: number;
  /** Concurrent streams in the one-session phase. */
  streams: number;
  /**
   * null: the embedded memory registry (one node). Else cluster mode against a real redis-server, with the
   * edge's lease lifetime short enough that the idle period sees whole renewal rounds.
   */
  redis: { leaseTtlSec: number } | null;
}

export interface SessionsResult {
  scenario: 'sessions';
  registry: 'memory' | 'redis';
  sessions: {
    requested: number;
    opened: number;
    /** Sessions the edge closed while they were idle (should be 0). */
    lostWhileIdle: number;
    connectSec: number;
    /** Sessions opened per second of connectSec: each is a claim in the registry. */
    claimsPerSec: number;
    idleSec: number;
    edgeRssBeforeMb: number;
    edgeRssAfterMb: number;
    edgePeakRssMb: number;
    /** (RSS after − RSS before) / opened. */
    edgeKbPerSession: number;
    /** Edge CPU over the idle period, per second: the cost of heartbeats and timers. */
    edgeIdleCpuMsPerSec: number;
  };
  streams: {
    requested: number;
    /** Streams open on the agent's session at the same time, at the highest point. */
    maxConcurrent: number;
    answered: number;
    /** Answers whose body named another request (a mix-up), or with a non-200 status. */
    wrong: number;
    failed: number;
    durationMs: number;
  };
  /** Redis mode only: what the sessions cost the registry (null with the memory registry). */
  redis: SessionsRedisResult | null;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function rssMb(edge: ChildService, field: 'VmRSS' | 'VmHWM' = 'VmRSS'): number {
  return (readStatusKb(edge.pid, field) ?? Number.NaN) / 1024;
}

/** Runs `task(i)` for i in [0, count) with at most `limit` running at once. */
async function forEachLimited(
  count: number,
  limit: number,
  task: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(limit, count) }, worker));
}

const QUIET_MS = 10_000;
/** Well under the edge's listen backlog. */
const CONNECTING_AT_ONCE = 128;

/** An agent that holds every stream until `expected` are open at once (or none arrived for a while). */
function holdingAgent(expected: number): {
  onStream: (stream: MuxStream) => void;
  stats: { maxConcurrent: number };
} {
  const held: { stream: MuxStream; target: string }[] = [];
  const stats = { maxConcurrent: 0 };
  let quiet: NodeJS.Timeout | undefined;
  const answerAll = (): void => {
    clearTimeout(quiet);
    for (const { stream, target } of held.splice(0)) {
      if (stream.closed) continue;
      const body = Buffer.from(target, 'latin1');
      const head = encodeResponseHead(
        {
          status: 200,
          statusMessage: 'OK',
          headers: ['content-type', 'text/plain', 'content-length', String(body.length)],
        },
        16 * 1024,
      );
      stream.sendHeaders(head, false);
      stream.write(body);
      stream.end();
    }
  };
  const onStream = (stream: MuxStream): void => {
    stream.handler = {
      onHeaders: (payload) => {
        held.push({ stream, target: decodeRequestHead(payload).target });
        stats.maxConcurrent = Math.max(stats.maxConcurrent, held.length);
        if (held.length >= expected) answerAll();
        else {
          // If the rest never come (streams lost or queued somewhere), answer what we hold rather than hang.
          clearTimeout(quiet);
          quiet = setTimeout(answerAll, QUIET_MS);
        }
      },
      onData: (chunk) => stream.consume(chunk.length),
      onEnd: () => {},
      onReset: () => {},
      onDrain: () => {},
    };
  };
  return { onStream, stats };
}

/**
 * Bounds how many connections are being opened at once. Every request of the streams phase stays in flight
 * until all have arrived, so its connections pile up; opening them all in one burst overflows the edge's
 * listen backlog (Node's default, 511), and the kernel's SYN retransmits (1 s, 3 s, 7 s...) then decide when
 * the rest arrive. Established connections do not count against the bound.
 */
function connectGate(limit: number): () => Promise<() => void> {
  let opening = 0;
  const waiting: (() => void)[] = [];
  return async () => {
    if (opening >= limit) await new Promise<void>((go) => waiting.push(go));
    opening++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      opening--;
      waiting.shift()?.();
    };
  };
}

async function get(
  url: URL,
  path: string,
  gate: () => Promise<() => void>,
): Promise<{ status: number; body: string }> {
  const connected = await gate();
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path, agent: false, headers: { connection: 'close' } },
      (res) => {
        let body = '';
        res.setEncoding('latin1');
        res.on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        res.on('error', reject);
      },
    );
    req.once('socket', (socket) => {
      if (!socket.connecting) connected();
      socket.once('connect', connected);
      socket.once('close', connected);
    });
    req.on('error', (err) => {
      connected();
      reject(err);
    });
    req.end();
  });
}

async function measureStreams(
  edgeUrl: URL,
  agentUrl: string,
  count: number,
): Promise<SessionsResult['streams']> {
  const holder = holdingAgent(count);
  const agent = await connectLightAgent({
    agentUrl,
    name: 'bench-streams',
    agentKey: 'bench-streams',
    onStream: holder.onStream,
  });
  const gate = connectGate(CONNECTING_AT_ONCE);
  const started = performance.now();
  let answered = 0;
  let wrong = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const path = `/item/${i}?n=${i}`;
      try {
        const res = await get(edgeUrl, `/session/${agent.name}${path}`, gate);
        answered++;
        if (res.status !== 200 || res.body !== path) wrong++;
      } catch {
        failed++;
      }
    }),
  );
  const durationMs = performance.now() - started;
  agent.session.close(ErrorCode.NO_ERROR, 'bench done');
  await agent.closed;
  return { requested: count, maxConcurrent: holder.stats.maxConcurrent, answered, wrong, failed, durationMs };
}

interface SessionsEdge {
  edge: ChildService;
  redis: RedisServer | undefined;
  probe: RedisProbe | undefined;
  stop(): Promise<void>;
}

/**
 * The edge under test. In Redis mode it is one cluster node against its own redis-server, with a short lease
 * and its operations port on, whose registry metric counts the renewal rounds.
 */
async function startSessionsEdge(settings: SessionsSettings): Promise<SessionsEdge> {
  // The edge's per-session stream limit (1,000 by default) must not be what the streams phase measures, nor
  // its per-owner limit (anonymous agents count per client address, and every agent here is on loopback)
  // what the sessions phase does.
  const limits = [
    '--max-streams-per-session',
    String(Math.max(1000, settings.streams)),
    '--max-sessions-per-owner',
    String(settings.sessions + 1),
  ];
  if (settings.redis === null) {
    const edge = await startEdgeService(limits);
    return { edge, redis: undefined, probe: undefined, stop: () => edge.stop() };
  }
  const redis = await startRedisServer();
  try {
    const [port, adminPort] = [await freePort(), await freePort()];
    const edge = await startEdgeService([
      ...limits,
      ...clusterNodeArgs(redis.url, 'bench-sessions', port),
      '--lease-ttl-ms',
      String(Math.round(settings.redis.leaseTtlSec * 1000)),
      '--admin-port',
      String(adminPort),
    ]);
    return {
      edge,
      redis,
      probe: redisProbe(redis, `http://127.0.0.1:${adminPort}`),
      async stop() {
        await edge.stop();
        await redis.stop();
      },
    };
  } catch (err) {
    await redis.stop();
    throw err;
  }
}

export async function runSessionsBench(
  settings: SessionsSettings,
  note: (line: string) => void,
): Promise<SessionsResult> {
  const { edge, probe, stop } = await startSessionsEdge(settings);
  const agents: LightAgent[] = [];
  try {
    const edgeUrl = new URL(edge.readyValue);
    const agentUrl = `ws://${edgeUrl.host}/_tunnel2/connect`;
    await sleep(1_000); // let the fresh process settle before the baseline
    const before = rssMb(edge);
    const redisAtStart = await probe?.snapshot();
    note(
      `edge ${edge.readyValue} (${settings.redis === null ? 'memory' : 'redis'} registry): RSS ${before.toFixed(1)} MB; ` +
        `opening ${settings.sessions} sessions`,
    );
    const connectStart = performance.now();
    let lastNote = connectStart;
    await forEachLimited(settings.sessions, settings.connectConcurrency, async (i) => {
      agents.push(
        await connectLightAgent({ agentUrl, name: `bench-idle-${i}`, agentKey: `bench-idle-key-${i}` }),
      );
      if (performance.now() - lastNote > 2_000) {
        lastNote = performance.now();
        note(`  ${agents.length}/${settings.sessions} sessions open, edge RSS ${rssMb(edge).toFixed(1)} MB`);
      }
    });
    const connectSec = (performance.now() - connectStart) / 1000;
    let lost = 0;
    for (const agent of agents) void agent.closed.then(() => lost++);
    const redisConnected = await probe?.snapshot();
    note(`${agents.length} sessions open in ${connectSec.toFixed(1)} s; idle for ${settings.idleSec} s`);
    const cpuStart = readCpuMs(edge.pid) ?? Number.NaN;
    const idleStart = performance.now();
    await sleep(settings.idleSec * 1000);
    const idleCpu = (readCpuMs(edge.pid) ?? Number.NaN) - cpuStart;
    const redisIdle = await probe?.snapshot();
    const idleWallSec = (performance.now() - idleStart) / 1000;
    const after = rssMb(edge);
    const sessions: SessionsResult['sessions'] = {
      requested: settings.sessions,
      opened: agents.length,
      lostWhileIdle: lost,
      connectSec,
      claimsPerSec: agents.length / connectSec,
      idleSec: settings.idleSec,
      edgeRssBeforeMb: before,
      edgeRssAfterMb: after,
      edgePeakRssMb: rssMb(edge, 'VmHWM'),
      edgeKbPerSession: agents.length > 0 ? ((after - before) * 1024) / agents.length : Number.NaN,
      edgeIdleCpuMsPerSec: idleCpu / settings.idleSec,
    };
    note(
      `edge RSS ${before.toFixed(1)} → ${after.toFixed(1)} MB: ${sessions.edgeKbPerSession.toFixed(1)} KB per session`,
    );
    const redis =
      settings.redis === null ||
      redisAtStart === undefined ||
      redisConnected === undefined ||
      redisIdle === undefined
        ? null
        : redisCosts(
            { start: redisAtStart, connected: redisConnected, idle: redisIdle },
            agents.length,
            idleWallSec,
            settings.redis.leaseTtlSec,
          );
    if (redis !== null) {
      note(
        `redis: ${redis.renewalRounds} renewal rounds while idle, ${redis.commandsPerSessionPerRound.toFixed(2)} ` +
          `commands per session per round, ${redis.roundTripsPerSessionPerLease.toFixed(4)} round trips ` +
          `per session per lease (reads: ${redis.socketReadsPerSessionPerLease.toFixed(4)}), ` +
          `${redis.bytesPerSession.toFixed(0)} B per session`,
      );
    }
    for (const agent of agents.splice(0)) agent.close();
    note(`${settings.streams} concurrent streams in one session`);
    const streams = await measureStreams(edgeUrl, agentUrl, settings.streams);
    note(
      `streams: ${streams.answered}/${streams.requested} answered, ${streams.wrong} wrong, ` +
        `${streams.failed} failed, at most ${streams.maxConcurrent} open at once`,
    );
    return {
      scenario: 'sessions',
      registry: settings.redis === null ? 'memory' : 'redis',
      sessions,
      streams,
      redis,
    };
  } finally {
    for (const agent of agents) agent.close();
    await stop();
  }
}
