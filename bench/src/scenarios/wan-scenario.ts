import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { deterministicChunks, deterministicSha256 } from '@tunnel2/test-backend';
import { chunkedUpload, download } from '../measure/bulk-client.js';
import { meterProcess, meterSelf, type ProcessUsage } from '../measure/process-stats.js';
import { lowSamplePercentiles, type PercentileKey } from '../plan/sample-sufficiency.js';
import {
  jsonEvent,
  type LoadTarget,
  startAgentService,
  startBackendService,
  startEdgeService,
  targetOf,
} from '../stacks/bench-stack.js';
import { type ChildService, startChildService } from '../stacks/child-service.js';

/*
 * `pnpm bench wan` (issue #21): the agent sits a round trip away from the edge. A delay link (delay-link.ts,
 * each in its own process: delay-link-process.ts)
 * carries the agent's WebSocket; the public client talks to the edge on loopback and the backend is local to
 * the agent, as on a laptop behind a WAN. The same transfers run "direct" through a second link of the same
 * round trip in front of the backend: what the link alone carries, so a slow tunnel cannot be the link's fault.
 */

export interface WanSettings {
  rttMs: number;
  /** Bytes of the single download and the single upload. */
  bytes: number;
  /** Each transfer (and the parallel set) stops here; its rate is then over what moved, marked timeLimited. */
  timeLimitSec: number;
  parallelStreams: number;
  parallelBytesEach: number;
  /** Small requests sampled for the time to first byte, idle and under a bulk download. */
  ttfbSamples: number;
  ttfbIntervalMs: number;
  linkBufferBytes: number;
}

export interface WanTransfer {
  /** Body bytes that moved (all streams of a parallel set together). */
  bytes: number;
  seconds: number;
  /** 10^6 bytes per second over what moved. */
  mbPerSec: number;
  /** The time limit stopped it before all bytes moved: the rate is still real, over a shorter transfer. */
  timeLimited: boolean;
  /** The SHA-256 of what moved matched what was sent. */
  verified: boolean;
  /** A failed transfer is reported, never averaged in. */
  error: string | null;
  edge: ProcessUsage | null;
  agent: ProcessUsage | null;
  /** CPU of the bench process (the client; the delay links run in their own processes), ms. */
  benchCpuMs: number;
}

export interface WanDirection {
  directMBps: number;
  tunnelMBps: number;
  direct: WanTransfer;
  tunnel: WanTransfer;
}

export interface LatencySummary {
  samples: number;
  failed: number;
  p50Ms: number | null;
  p95Ms: number | null;
  maxMs: number | null;
  /** p50 / p95 when the samples are too few for them (n · (1 − p) < 10: p95 needs 200). */
  lowSamplePercentiles: PercentileKey[];
}

export interface WanTtfb {
  /**
   * Small GETs direct through the link alone: the round trip the link really adds (its timers are late by a
   * fraction of a ms each way) plus the backend's answer; the floor for the tunnel's figures below.
   */
  direct: LatencySummary;
  /** Small GETs through the tunnel with nothing else running: the floor (one round trip plus processing). */
  idle: LatencySummary;
  /** The same while one large download runs on the same session. */
  underLoad: LatencySummary;
  /**
   * Small GETs direct through the link while a large download runs direct through the same link: what the
   * machine alone adds under load (every process shares its two cores), beside the tunnel's figure.
   */
  directUnderLoad: LatencySummary;
  /** That direct download's rate while its samples ran. */
  directBulkMBps: number;
  /** The large download's rate while the samples ran: proof it was flowing. */
  bulkMBps: number;
  bulkError: string | null;
  /**
   * The bench process's event-loop delay while the samples ran (p50 / max, ms): it runs the client (the
   * links have their own processes), so a busy loop delays the samples too: that much is the instrument's.
   */
  benchLoopDelayMs: { p50: number; max: number };
}

export interface WanResult {
  scenario: 'wan';
  settings: WanSettings;
  download: WanDirection;
  upload: WanDirection;
  /** `parallelStreams` concurrent downloads of `parallelBytesEach` (a browser loading a page), aggregate rate. */
  parallel: WanDirection;
  ttfb: WanTtfb;
  /** Largest resident set of the edge and the agent over every tunnel phase, MiB. */
  edgePeakRssMb: number | null;
  agentPeakRssMb: number | null;
}

const SMALL_PATH = '/loadtest/get';
/** The download under the TTFB samples: far more than any run moves; it is cut once the samples are taken. */
const ENDLESS_BYTES = 2 ** 40;
/** The large download counts as flowing once this much arrived. */
const FLOWING_BYTES = 2 * 2 ** 20;

function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? null;
}

function summarize(values: number[], failed: number): LatencySummary {
  const sorted = [...values].sort((a, b) => a - b);
  const round = (n: number | null): number | null => (n === null ? null : Math.round(n * 100) / 100);
  return {
    samples: values.length,
    failed,
    p50Ms: round(percentile(sorted, 50)),
    p95Ms: round(percentile(sorted, 95)),
    maxMs: round(sorted.at(-1) ?? null),
    lowSamplePercentiles: lowSamplePercentiles(values.length, ['p50', 'p95']),
  };
}

interface Moved {
  bytes: number;
  timeLimited: boolean;
  /** Compares what moved with what was sent; called once the clock stopped (hashing the expectation costs). */
  verify(): boolean;
}

/** Downloads `/bytes/<bytes>` (until `stop`), hashing what arrives against the backend's deterministic bytes. */
async function verifiedDownload(target: LoadTarget, bytes: number, stop: AbortSignal): Promise<Moved> {
  const hash = createHash('sha256');
  const response = await download(target, `/bytes/${bytes}`, {
    onBody: (chunk) => hash.update(chunk),
    signal: stop,
  });
  const moved = response.bodyBytes;
  const received = hash.digest('hex');
  return { bytes: moved, timeLimited: response.cut, verify: () => received === deterministicSha256(moved) };
}

/** Uploads the deterministic bytes to `/upload` (until `stop`); the backend answers their count and hash. */
async function verifiedUpload(target: LoadTarget, bytes: number, stop: AbortSignal): Promise<Moved> {
  const hash = createHash('sha256');
  const chunks = function* (): Generator<Buffer> {
    for (const chunk of deterministicChunks(bytes)) {
      hash.update(chunk);
      yield chunk;
    }
  };
  const { sent, text } = await chunkedUpload(target, '/upload', chunks(), stop);
  const answer = JSON.parse(text) as { bytes?: unknown; sha256?: unknown };
  if (answer.bytes !== sent)
    throw new Error(`sent ${sent} bytes, the backend counted ${String(answer.bytes)}`);
  const digest = hash.digest('hex');
  return { bytes: sent, timeLimited: sent < bytes, verify: () => answer.sha256 === digest };
}

interface Stack {
  backend: ChildService;
  edge: ChildService;
  agent: ChildService;
  links: ChildService[];
  direct: LoadTarget;
  tunnel: LoadTarget;
  close(): Promise<void>;
}

const linkBin = (): string =>
  join(fileURLToPath(new URL('../processes/', import.meta.url)), 'delay-link-process.js');

async function startWanStack(settings: WanSettings): Promise<Stack> {
  const services: ChildService[] = [];
  const links: ChildService[] = [];
  const close = async (): Promise<void> => {
    for (const service of services.splice(0).reverse()) await service.stop();
    for (const link of links.splice(0)) await link.stop();
  };
  try {
    const backend = await startBackendService();
    services.push(backend);
    const edge = await startEdgeService();
    services.push(edge);
    const linkOf = async (url: string): Promise<{ port: number }> => {
      const link = await startChildService({
        name: `delay link to ${url}`,
        args: [
          linkBin(),
          '--target',
          url,
          '--rtt',
          String(settings.rttMs),
          '--max-bytes',
          String(settings.linkBufferBytes),
        ],
        ready: (line) => {
          const listening = jsonEvent(line, 'listening')?.url;
          return typeof listening === 'string' ? listening : undefined;
        },
      });
      links.push(link);
      return { port: Number(new URL(link.readyValue).port) };
    };
    const agentLink = await linkOf(edge.readyValue);
    const agent = await startAgentService(backend.readyValue, `http://127.0.0.1:${agentLink.port}`, 'wan');
    services.push(agent);
    const backendLink = await linkOf(backend.readyValue);
    // The public side talks to the edge itself (its port, the tunnel's host name): only the agent is far away.
    const tunnelHost = new URL(agent.readyValue).hostname;
    const edgeTarget = targetOf(edge.readyValue);
    return {
      backend,
      edge,
      agent,
      links,
      direct: { origin: `http://127.0.0.1:${backendLink.port}`, host: targetOf(backend.readyValue).host },
      tunnel: { origin: edgeTarget.origin, host: `${tunnelHost}:${new URL(edge.readyValue).port}` },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** Runs `move` under the time limit, with the edge's and the agent's CPU and peak RSS when it is the tunnel. */
async function measured(
  stack: Stack,
  tunnel: boolean,
  timeLimitSec: number,
  move: (stop: AbortSignal) => Promise<Moved>,
): Promise<WanTransfer> {
  const meters = tunnel ? [meterProcess(stack.edge.pid), meterProcess(stack.agent.pid)] : [];
  const bench = meterSelf();
  const started = performance.now();
  let moved: Moved | undefined;
  let error: string | null = null;
  try {
    moved = await move(AbortSignal.timeout(timeLimitSec * 1000));
  } catch (err) {
    error = err instanceof Error ? err.message : String(err);
  }
  const seconds = (performance.now() - started) / 1000;
  const [edge, agent] = meters.map((m) => m.stop());
  const benchCpuMs = bench.stop()?.cpuMs ?? Number.NaN;
  const verified = moved?.verify() ?? false;
  if (moved !== undefined && !verified) error = 'the SHA-256 of what moved does not match what was sent';
  return {
    bytes: moved?.bytes ?? 0,
    timeLimited: moved?.timeLimited ?? false,
    verified,
    seconds,
    mbPerSec: (moved?.bytes ?? 0) / seconds / 1e6,
    error,
    edge: edge ?? null,
    agent: agent ?? null,
    benchCpuMs,
  };
}

/** Small GETs through the tunnel, `intervalMs` apart (or right after the previous one when it took longer). */
async function sampleTtfb(
  target: LoadTarget,
  count: number,
  intervalMs: number,
  keepGoing: () => boolean,
): Promise<LatencySummary> {
  const values: number[] = [];
  let failed = 0;
  for (let i = 0; i < count && keepGoing(); i++) {
    const started = performance.now();
    try {
      const answer = await download(target, SMALL_PATH);
      values.push(answer.firstByteAt - started);
    } catch {
      failed += 1;
    }
    const wait = intervalMs - (performance.now() - started);
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
  return summarize(values, failed);
}

interface LoadedTtfb {
  underLoad: LatencySummary;
  bulkMBps: number;
  bulkError: string | null;
  benchLoopDelayMs: { p50: number; max: number };
}

async function ttfbUnderLoad(target: LoadTarget, settings: WanSettings): Promise<LoadedTtfb> {
  const stop = new AbortController();
  const limit = setTimeout(() => stop.abort(), settings.timeLimitSec * 1000);
  let received = 0;
  let flowing!: () => void;
  const isFlowing = new Promise<void>((resolve) => {
    flowing = resolve;
  });
  let running = true;
  let bulkError: string | null = null;
  const bulk = download(target, `/bytes/${ENDLESS_BYTES}`, {
    signal: stop.signal,
    onBody: (chunk) => {
      received += chunk.length;
      if (received >= FLOWING_BYTES) flowing();
    },
  })
    .catch((err: unknown) => {
      bulkError = err instanceof Error ? err.message : String(err);
    })
    .finally(() => {
      running = false;
      flowing();
    });
  await isFlowing;
  const from = { bytes: received, at: performance.now() };
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const underLoad = await sampleTtfb(target, settings.ttfbSamples, settings.ttfbIntervalMs, () => running);
  loop.disable();
  const benchLoopDelayMs = {
    p50: Math.round(loop.percentile(50) / 1e4) / 100,
    max: Math.round(loop.max / 1e4) / 100,
  };
  const bulkMBps = (received - from.bytes) / ((performance.now() - from.at) / 1000) / 1e6;
  stop.abort();
  clearTimeout(limit);
  await bulk;
  if (bulkError === null && underLoad.samples < settings.ttfbSamples) {
    bulkError = 'the large download ended before the samples were taken';
  }
  return { underLoad, bulkMBps, bulkError, benchLoopDelayMs };
}

function direction(direct: WanTransfer, tunnel: WanTransfer): WanDirection {
  return { directMBps: direct.mbPerSec, tunnelMBps: tunnel.mbPerSec, direct, tunnel };
}

export async function runWanBench(settings: WanSettings, note: (line: string) => void): Promise<WanResult> {
  note(
    `starting the stack; agent ↔ edge and client ↔ backend (direct) each through a ${settings.rttMs} ms link`,
  );
  const stack = await startWanStack(settings);
  try {
    const mib = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
    const line = (label: string, t: WanTransfer): WanTransfer => {
      note(
        `${label}: ${t.mbPerSec.toFixed(1)} MB/s, ${mib(t.bytes)} in ${t.seconds.toFixed(2)} s` +
          (t.timeLimited ? ' (time-limited)' : '') +
          (t.edge && t.agent
            ? `, peak RSS edge ${t.edge.peakRssMb.toFixed(0)} / agent ${t.agent.peakRssMb.toFixed(0)} MB`
            : '') +
          (t.error === null ? '' : ` — ERROR: ${t.error}`),
      );
      return t;
    };
    // First, and while the agent's round-trip samples settle: small requests with nothing else running.
    const idle = await sampleTtfb(stack.tunnel, settings.ttfbSamples, settings.ttfbIntervalMs, () => true);
    const directTtfb = await sampleTtfb(
      stack.direct,
      settings.ttfbSamples,
      settings.ttfbIntervalMs,
      () => true,
    );
    note(
      `time to first byte, idle: tunnel p50 ${idle.p50Ms} ms, max ${idle.maxMs} ms; ` +
        `direct through the link p50 ${directTtfb.p50Ms} ms`,
    );
    const run = (label: string, tunnel: boolean, move: (stop: AbortSignal) => Promise<Moved>) =>
      measured(stack, tunnel, settings.timeLimitSec, move).then((t) => line(label, t));

    const each = async (
      name: string,
      bytes: number,
      move: (target: LoadTarget, stop: AbortSignal) => Promise<Moved>,
    ): Promise<WanDirection> =>
      direction(
        await run(`${name} ${mib(bytes)} direct`, false, (stop) => move(stack.direct, stop)),
        await run(`${name} ${mib(bytes)} tunnel`, true, (stop) => move(stack.tunnel, stop)),
      );
    const downloadResult = await each('download', settings.bytes, (t, stop) =>
      verifiedDownload(t, settings.bytes, stop),
    );
    const uploadResult = await each('upload', settings.bytes, (t, stop) =>
      verifiedUpload(t, settings.bytes, stop),
    );
    const parallel = await each(
      `${settings.parallelStreams} parallel downloads ×`,
      settings.parallelBytesEach,
      async (t, stop) => {
        const all = await Promise.all(
          Array.from({ length: settings.parallelStreams }, () =>
            verifiedDownload(t, settings.parallelBytesEach, stop),
          ),
        );
        return {
          bytes: all.reduce((sum, m) => sum + m.bytes, 0),
          timeLimited: all.some((m) => m.timeLimited),
          verify: () => all.every((m) => m.verify()),
        };
      },
    );
    const edgeMeter = meterProcess(stack.edge.pid);
    const agentMeter = meterProcess(stack.agent.pid);
    const loaded = await ttfbUnderLoad(stack.tunnel, settings);
    const ttfbEdge = edgeMeter.stop();
    const ttfbAgent = agentMeter.stop();
    const directLoaded = await ttfbUnderLoad(stack.direct, settings);
    note(
      `time to first byte direct through the link under a ${directLoaded.bulkMBps.toFixed(1)} MB/s direct download: ` +
        `p50 ${directLoaded.underLoad.p50Ms} ms, max ${directLoaded.underLoad.maxMs} ms` +
        (directLoaded.bulkError === null ? '' : ` — ERROR: ${directLoaded.bulkError}`),
    );
    note(
      `time to first byte under a ${loaded.bulkMBps.toFixed(1)} MB/s download: p50 ${loaded.underLoad.p50Ms} ms, ` +
        `max ${loaded.underLoad.maxMs} ms (bench event-loop delay p50 ${loaded.benchLoopDelayMs.p50} ms, ` +
        `max ${loaded.benchLoopDelayMs.max} ms)` +
        (loaded.bulkError === null ? '' : ` — ERROR: ${loaded.bulkError}`),
    );
    const tunnelTransfers = [downloadResult.tunnel, uploadResult.tunnel, parallel.tunnel];
    const peak = (values: (ProcessUsage | null)[]): number | null => {
      const known = values.filter((v): v is ProcessUsage => v !== null).map((v) => v.peakRssMb);
      return known.length === 0 ? null : Math.max(...known);
    };
    return {
      scenario: 'wan',
      settings,
      download: downloadResult,
      upload: uploadResult,
      parallel,
      ttfb: {
        direct: directTtfb,
        idle,
        ...loaded,
        directUnderLoad: directLoaded.underLoad,
        directBulkMBps: directLoaded.bulkMBps,
      },
      edgePeakRssMb: peak([...tunnelTransfers.map((t) => t.edge), ttfbEdge]),
      agentPeakRssMb: peak([...tunnelTransfers.map((t) => t.agent), ttfbAgent]),
    };
  } finally {
    await stack.close();
  }
}
