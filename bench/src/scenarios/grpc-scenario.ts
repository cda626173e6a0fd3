import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { autocannonRowLoad } from '../measure/autocannon-row-load.js';
import { fixed } from '../measure/report-format.js';
import {
  errorTotal,
  type MeteredProcess,
  measureRow,
  type RowLoad,
  type RowSpec,
  ratioTarget,
  rowLoadText,
  type SideBySideResult,
  type SideBySideRow,
  type SideBySideTarget,
  unavailableRow,
} from '../measure/side-by-side-rows.js';
import { autoConnections } from '../plan/scenarios.js';
import type { GrpcClientSpec } from '../processes/grpc-client-process.js';
import {
  type BenchStack,
  jsonEvent,
  type LoadTarget,
  startAgentService,
  startBenchStack,
  targetOf,
} from '../stacks/bench-stack.js';
import { type ChildService, startChildService } from '../stacks/child-service.js';

/*
 * `pnpm bench grpc`: a grpc-js server (grpc-service-process.ts) called by grpc-js clients in a process of
 * their own (grpc-client-process.ts), directly and through the tunnel (the agent run with `--h2c`):
 * unary Echo calls at a fixed rate and in a closed loop, then one bidirectional stream moving
 * `messageKib` messages both ways. The HTTP/1.1 tunnel at the same rate (autocannon, the test backend,
 * another agent on the same edge) is the yardstick for the CPU per call.
 */

export interface GrpcSettings {
  ratePerSec: number;
  /** Calls in flight in the closed loop. */
  concurrency: number;
  durationSec: number;
  warmupSec: number;
  /** Unary request and answer size, bytes (the test backend's /loadtest/get is about 400). */
  unaryBytes: number;
  /** Size of each message of the bidi stream, KiB. */
  messageKib: number;
}

export type GrpcResult = SideBySideResult<GrpcSettings>;

const binOf = (file: string): string => join(fileURLToPath(new URL('../processes/', import.meta.url)), file);
const TIMEOUT_SEC = 10;
/** The bench's reading of "flat RSS" over the stream: edge and agent grow by at most this much. */
export const FLAT_RSS_MB = 64;

/** Runs the client process once; resolves with its JSON line. */
function runClient(spec: GrpcClientSpec): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [binOf('grpc-client-process.js'), JSON.stringify(spec)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      err = (err + chunk).slice(-2000);
    });
    child.once('error', reject);
    child.once('exit', (code) => {
      const last = out.trim().split('\n').pop() ?? '';
      try {
        resolve(JSON.parse(last) as Record<string, unknown>);
      } catch {
        reject(new Error(`the gRPC client exited ${code} without a result; stderr: ${err.trim()}`));
      }
    });
  });
}

async function clientLoad(spec: GrpcClientSpec): Promise<RowLoad> {
  const { event: _event, ...load } = await runClient(spec);
  return load as unknown as RowLoad;
}

interface Stack {
  bench: BenchStack;
  grpcServer: ChildService;
  grpcAgent: ChildService | undefined;
  /** Why gRPC through the tunnel cannot be measured; null when a call went through. */
  tunnelMissing: string | null;
}

function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  const stderr = text.indexOf('stderr: ');
  return (stderr >= 0 ? text.slice(stderr + 8) : text).split('\n')[0]!.slice(0, 300);
}

async function startStack(started: ChildService[]): Promise<Stack> {
  const bench = await startBenchStack({ tunnel: true, subdomain: 'bench-h1' });
  const grpcServer = await startChildService({
    name: 'gRPC server (grpc-js)',
    args: [binOf('grpc-service-process.js')],
    ready: (line) => {
      const url = jsonEvent(line, 'listening')?.url;
      return typeof url === 'string' ? url : undefined;
    },
  });
  started.push(grpcServer);
  let grpcAgent: ChildService | undefined;
  try {
    grpcAgent = await startAgentService(
      grpcServer.readyValue,
      bench.edge!.readyValue,
      'bench-grpc',
      undefined,
      false,
      ['--h2c'],
    );
    started.push(grpcAgent);
  } catch (err) {
    return {
      bench,
      grpcServer,
      grpcAgent: undefined,
      tunnelMissing: `the agent did not start with --h2c (${firstLine(err)})`,
    };
  }
  const tunnel = targetOf(grpcAgent.readyValue);
  const answer = await runClient({
    mode: 'probe',
    address: new URL(tunnel.origin).host,
    authority: tunnel.host,
    durationSec: 0,
    ratePerSec: 0,
    concurrency: 0,
    messageBytes: 0,
    timeoutSec: 5,
  });
  const tunnelMissing =
    answer.ok === true ? null : `a gRPC call through the tunnel failed (${String(answer.error)})`;
  return { bench, grpcServer, grpcAgent, tunnelMissing };
}

export async function runGrpcBench(
  settings: GrpcSettings,
  note: (line: string) => void,
): Promise<GrpcResult> {
  const started: ChildService[] = [];
  let stack: Stack | undefined;
  try {
    stack = await startStack(started);
    const { bench, grpcServer, grpcAgent, tunnelMissing } = stack;
    if (tunnelMissing !== null) note(`${tunnelMissing}: no gRPC tunnel rows`);
    const edge: MeteredProcess = { name: 'edge', pid: bench.edge!.pid, between: true };
    const server: MeteredProcess = { name: 'backend', pid: grpcServer.pid, between: false };
    const h1Procs: MeteredProcess[] = [
      edge,
      { name: 'agent', pid: bench.agent!.pid, between: true },
      { name: 'backend', pid: bench.backend.pid, between: false },
    ];
    const tunnelProcs: MeteredProcess[] =
      grpcAgent === undefined ? [] : [edge, { name: 'agent', pid: grpcAgent.pid, between: true }, server];
    const direct = targetOf(grpcServer.readyValue);
    const tunnel: LoadTarget | undefined =
      grpcAgent === undefined ? undefined : targetOf(grpcAgent.readyValue);
    const rows: SideBySideRow[] = [];
    const { durationSec, warmupSec, ratePerSec } = settings;

    const run = async (
      spec: RowSpec,
      procs: MeteredProcess[],
      load: (seconds: number) => Promise<RowLoad>,
      missing: string | null,
    ): Promise<void> => {
      if (missing !== null) {
        rows.push(unavailableRow(spec, missing));
        return;
      }
      if (warmupSec > 0) await load(warmupSec);
      const row = await measureRow(spec, procs, () => load(durationSec));
      rows.push(row);
      const rss =
        row.rss === null
          ? ''
          : `, RSS ${Object.entries(row.rss)
              .map(
                ([name, r]) => `${name} ${fixed(r.firstMb)} → ${fixed(r.lastMb)} (max ${fixed(r.maxMb)}) MiB`,
              )
              .join(', ')}`;
      note(
        `${row.label}, ${rowLoadText(row)}: ${fixed(row.rps)}/s, ${errorTotal(row)} errors` +
          (row.bytesPerSec === null || row.mode !== 'stream'
            ? ''
            : `, ${fixed(row.bytesPerSec / 1e6, 1)} MB/s`) +
          `, p99 ${fixed(row.latencyMs.p99, 2)} ms` +
          (row.betweenCpuPerRequestUs === null
            ? `, backend CPU ${fixed(row.cpuPerRequestUs.backend)} µs`
            : `, tunnel CPU ${fixed(row.betweenCpuPerRequestUs)} µs (edge ${fixed(row.cpuPerRequestUs.edge)} + agent ${fixed(row.cpuPerRequestUs.agent)})`) +
          ` per ${row.mode === 'stream' ? 'message' : 'call'}${rss}`,
      );
    };
    const client = (target: LoadTarget, mode: GrpcClientSpec['mode'], seconds: number) =>
      clientLoad({
        mode,
        address: new URL(target.origin).host,
        authority: target.host,
        durationSec: seconds,
        ratePerSec,
        concurrency: settings.concurrency,
        messageBytes: mode === 'bidi' ? settings.messageKib * 1024 : settings.unaryBytes,
        timeoutSec: TIMEOUT_SEC,
      });
    const spec = (
      protocol: string,
      side: string,
      mode: SideBySideRow['mode'],
      generator: string,
      connections: number,
    ): RowSpec => ({
      label: `${protocol} ${side}`,
      protocol,
      side,
      mode,
      targetRps: mode === 'rate' ? ratePerSec : null,
      connections,
      // The closed loop's calls share one channel: streams of one connection.
      streams: mode === 'closed' && protocol !== 'http/1.1' ? settings.concurrency : null,
      generator,
    });

    const h1Connections = autoConnections(ratePerSec);
    await run(
      spec('http/1.1', 'tunnel', 'rate', 'autocannon', h1Connections),
      h1Procs,
      (seconds) =>
        autocannonRowLoad({
          target: bench.tunnel!,
          path: '/loadtest/get',
          connections: h1Connections,
          durationSec: seconds,
          ratePerSec,
          timeoutSec: TIMEOUT_SEC,
        }),
      null,
    );
    for (const mode of ['rate', 'closed', 'stream'] as const) {
      const clientMode = mode === 'rate' ? 'unary-rate' : mode === 'closed' ? 'unary-closed' : 'bidi';
      const connections = 1;
      const kind = mode === 'stream' ? 'grpc bidi' : 'grpc unary';
      await run(
        spec(kind, 'direct', mode, 'grpc-js', connections),
        [server],
        (s) => client(direct, clientMode, s),
        null,
      );
      await run(
        spec(kind, 'tunnel', mode, 'grpc-js', connections),
        tunnelProcs,
        (s) => client(tunnel!, clientMode, s),
        tunnelMissing,
      );
    }
    return {
      scenario: 'grpc',
      settings,
      stack: {
        grpcServerUrl: grpcServer.readyValue,
        backendUrl: bench.backend.readyValue,
        edgeUrl: bench.edge?.readyValue ?? null,
        tunnelUrl: grpcAgent?.readyValue ?? null,
        http1TunnelUrl: bench.agent?.readyValue ?? null,
      },
      rows,
      targets: grpcTargets(rows),
    };
  } finally {
    for (const service of started.reverse()) await service.stop();
    await stack?.bench.close();
  }
}

const byLabel = (rows: SideBySideRow[], label: string, mode: SideBySideRow['mode']) =>
  rows.find((r) => r.label === label && r.mode === mode);

/** RSS growth (max − first) of the edge and the agent over the tunnel's stream, the larger of the two. */
function rssTarget(row: SideBySideRow | undefined): SideBySideTarget {
  const name = 'edge and agent RSS growth over the bidi stream (max − first)';
  const limit = `≤ ${FLAT_RSS_MB} MiB`;
  if (row === undefined || row.unavailable !== null || row.rss === null) {
    return {
      name,
      limit,
      measured: null,
      text: '–',
      met: null,
      unavailable: row?.unavailable ?? 'the stream did not run',
    };
  }
  const growth = Math.max(
    ...['edge', 'agent'].map((p) => (row.rss?.[p] === undefined ? 0 : row.rss[p].maxMb - row.rss[p].firstMb)),
  );
  return {
    name,
    limit,
    measured: growth,
    text: `${growth.toFixed(1)} MiB`,
    met: growth <= FLAT_RSS_MB,
    unavailable: null,
  };
}

export function grpcTargets(rows: SideBySideRow[]): SideBySideTarget[] {
  const failed = rows.reduce((sum, row) => sum + errorTotal(row), 0);
  const cpu = (row: SideBySideRow): number | null => row.betweenCpuPerRequestUs;
  const tunnelStream = byLabel(rows, 'grpc bidi tunnel', 'stream');
  return [
    {
      name: 'failed calls, all rows',
      limit: '0',
      measured: failed,
      text: String(failed),
      met: failed === 0,
      unavailable: null,
    },
    ratioTarget(
      'tunnel CPU per unary call / HTTP/1.1 tunnel CPU per request, same rate',
      '≤ 1.5×',
      { row: byLabel(rows, 'grpc unary tunnel', 'rate'), value: cpu },
      { row: byLabel(rows, 'http/1.1 tunnel', 'rate'), value: cpu },
      (x) => x <= 1.5,
    ),
    ratioTarget(
      'bidi stream bytes per second, tunnel / direct',
      '≥ 0.5×',
      { row: tunnelStream, value: (r) => r.bytesPerSec },
      { row: byLabel(rows, 'grpc bidi direct', 'stream'), value: (r) => r.bytesPerSec },
      (x) => x >= 0.5,
    ),
    rssTarget(tunnelStream),
  ];
}
