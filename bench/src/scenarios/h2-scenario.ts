import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { autocannonRowLoad } from '../measure/autocannon-row-load.js';
import { probeH2c, runH2Paced } from '../measure/h2-paced-client.js';
import { findH2load, runH2load } from '../measure/h2load-runner.js';
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
import {
  type BenchStack,
  jsonEvent,
  type LoadTarget,
  startBenchStack,
  targetOf,
} from '../stacks/bench-stack.js';
import { type ChildService, startChildService } from '../stacks/child-service.js';

/*
 * `pnpm bench h2`: HTTP/2 through the tunnel beside HTTP/1.1 through the same edge and agent, and each
 * beside its direct side. The edge serves h2c with prior knowledge on its plain port and the agent forwards
 * to the HTTP/1.1 test backend (the agent chooses the backend's protocol itself); the direct h2 rows go to
 * an h2c server answering the test backend's body (h2c-backend-process.ts). At each fixed rate: HTTP/1.1
 * with the kit's paced autocannon, h2 with a paced node:http2 client (h2-paced-client.ts); then a closed
 * loop: h2load -c C -m S against autocannon with C × S connections (the same requests in flight).
 */

export interface H2Settings {
  rates: number[];
  /** h2: sessions of the paced client and h2load's -c; HTTP/1.1's closed loop uses connections × streams. */
  connections: number;
  /** h2load's -m: concurrent streams per connection; also the paced client's cap per session. */
  streams: number;
  durationSec: number;
  warmupSec: number;
  path: string;
}

export type H2Result = SideBySideResult<H2Settings>;

const binOf = (file: string): string => join(fileURLToPath(new URL('../processes/', import.meta.url)), file);
const TIMEOUT_SEC = 10;

/** The rows' load with autocannon, paced at `ratePerSec` or closed loop. */
function autocannonLoad(
  target: LoadTarget,
  path: string,
  connections: number,
  durationSec: number,
  ratePerSec: number | undefined,
): Promise<RowLoad> {
  return autocannonRowLoad({ target, path, connections, durationSec, ratePerSec, timeoutSec: TIMEOUT_SEC });
}

interface Stack {
  bench: BenchStack;
  h2cBackend: ChildService;
  /** Why h2 through the tunnel cannot be measured; null when the edge answered an h2c request. */
  h2TunnelMissing: string | null;
}

async function startStack(settings: H2Settings, started: ChildService[]): Promise<Stack> {
  const bench = await startBenchStack({ tunnel: true, subdomain: 'bench-h2' });
  const h2cBackend = await startChildService({
    name: 'h2c backend',
    args: [binOf('h2c-backend-process.js'), '--body-url', `${bench.backend.readyValue}${settings.path}`],
    ready: (line) => {
      const url = jsonEvent(line, 'listening')?.url;
      return typeof url === 'string' ? url : undefined;
    },
  });
  started.push(h2cBackend);
  let h2TunnelMissing: string | null = null;
  const tunnel = bench.tunnel!;
  try {
    const status = await probeH2c(tunnel.origin, tunnel.host, settings.path);
    if (status !== 200) h2TunnelMissing = `the edge answered an h2c GET ${settings.path} with ${status}`;
  } catch (err) {
    h2TunnelMissing =
      'this edge does not serve HTTP/2 with prior knowledge (h2c) on its plain port ' +
      `(${err instanceof Error ? err.message : String(err)}): no h2 tunnel rows`;
  }
  return { bench, h2cBackend, h2TunnelMissing };
}

export async function runH2Bench(settings: H2Settings, note: (line: string) => void): Promise<H2Result> {
  findH2load();
  const started: ChildService[] = [];
  let stack: Stack | undefined;
  try {
    stack = await startStack(settings, started);
    const { bench, h2cBackend, h2TunnelMissing } = stack;
    if (h2TunnelMissing !== null) note(h2TunnelMissing);
    const tunnel = bench.tunnel!;
    const h2cDirect = targetOf(h2cBackend.readyValue);
    const backend: MeteredProcess = { name: 'backend', pid: bench.backend.pid, between: false };
    const tunnelProcs: MeteredProcess[] = [
      { name: 'edge', pid: bench.edge!.pid, between: true },
      { name: 'agent', pid: bench.agent!.pid, between: true },
      backend,
    ];
    const h2cProcs: MeteredProcess[] = [{ name: 'backend', pid: h2cBackend.pid, between: false }];
    const rows: SideBySideRow[] = [];
    const { path, durationSec, warmupSec, connections, streams } = settings;

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
      note(
        `${row.label}, ${rowLoadText(row)}: ${fixed(row.rps)} rps, ${errorTotal(row)} errors, ` +
          `p99 ${fixed(row.latencyMs.p99, 2)} ms, mean ${fixed(row.latencyMs.mean, 2)} ms` +
          (row.betweenCpuPerRequestUs === null
            ? `, backend CPU ${fixed(row.cpuPerRequestUs.backend)} µs/req`
            : `, tunnel CPU ${fixed(row.betweenCpuPerRequestUs)} µs/req (edge ${fixed(row.cpuPerRequestUs.edge)} + agent ${fixed(row.cpuPerRequestUs.agent)})`),
      );
    };

    for (const rate of settings.rates) {
      const h1Connections = autoConnections(rate);
      const spec = (protocol: string, side: string, generator: string, conns: number): RowSpec => ({
        label: `${protocol} ${side}`,
        protocol,
        side,
        mode: 'rate',
        targetRps: rate,
        connections: conns,
        streams: null,
        generator,
      });
      await run(
        spec('http/1.1', 'direct', 'autocannon', h1Connections),
        [backend],
        (s) => autocannonLoad(bench.direct, path, h1Connections, s, rate),
        null,
      );
      await run(
        spec('http/1.1', 'tunnel', 'autocannon', h1Connections),
        tunnelProcs,
        (s) => autocannonLoad(tunnel, path, h1Connections, s, rate),
        null,
      );
      const paced = (target: LoadTarget, seconds: number) =>
        runH2Paced({
          origin: target.origin,
          authority: target.host,
          path,
          connections,
          maxStreamsPerConnection: streams,
          ratePerSec: rate,
          durationSec: seconds,
          timeoutSec: TIMEOUT_SEC,
        });
      await run(spec('h2', 'direct', 'node:http2', connections), h2cProcs, (s) => paced(h2cDirect, s), null);
      await run(
        spec('h2', 'tunnel', 'node:http2', connections),
        tunnelProcs,
        (s) => paced(tunnel, s),
        h2TunnelMissing,
      );
    }

    const closed = (protocol: string, side: string, generator: string, conns: number, s: number | null) => ({
      label: `${protocol} ${side}`,
      protocol,
      side,
      mode: 'closed' as const,
      targetRps: null,
      connections: conns,
      streams: s,
      generator,
    });
    const h1Closed = connections * streams;
    await run(
      closed('http/1.1', 'direct', 'autocannon', h1Closed, null),
      [backend],
      (s) => autocannonLoad(bench.direct, path, h1Closed, s, undefined),
      null,
    );
    await run(
      closed('http/1.1', 'tunnel', 'autocannon', h1Closed, null),
      tunnelProcs,
      (s) => autocannonLoad(tunnel, path, h1Closed, s, undefined),
      null,
    );
    const h2load = (target: LoadTarget) => (seconds: number) =>
      runH2load({
        url: `${target.origin}${path}`,
        authority: target.host,
        connections,
        streams,
        durationSec: seconds,
        // The discarded warm-up is a run of its own, as for the other rows: h2load's --warm-up-time counts in its totals.
        warmupSec: 0,
      });
    await run(closed('h2', 'direct', 'h2load', connections, streams), h2cProcs, h2load(h2cDirect), null);
    await run(
      closed('h2', 'tunnel', 'h2load', connections, streams),
      tunnelProcs,
      h2load(tunnel),
      h2TunnelMissing,
    );

    return {
      scenario: 'h2',
      settings,
      stack: {
        backendUrl: bench.backend.readyValue,
        h2cBackendUrl: h2cBackend.readyValue,
        edgeUrl: bench.edge?.readyValue ?? null,
        tunnelUrl: bench.agent?.readyValue ?? null,
      },
      rows,
      targets: h2Targets(rows, settings),
    };
  } finally {
    for (const service of started.reverse()) await service.stop();
    await stack?.bench.close();
  }
}

function find(rows: SideBySideRow[], label: string, mode: SideBySideRow['mode'], rate: number | null) {
  return rows.find((r) => r.label === label && r.mode === mode && r.targetRps === rate);
}

const cpu = (row: SideBySideRow): number | null => row.betweenCpuPerRequestUs;

export function h2Targets(rows: SideBySideRow[], settings: H2Settings): SideBySideTarget[] {
  const failed = rows.reduce((sum, row) => sum + errorTotal(row), 0);
  const targets: SideBySideTarget[] = [
    {
      name: 'failed requests, all rows',
      limit: '0',
      measured: failed,
      text: String(failed),
      met: failed === 0,
      unavailable: null,
    },
  ];
  for (const rate of settings.rates) {
    targets.push(
      ratioTarget(
        `tunnel CPU per request, h2 / HTTP/1.1, at ${rate} RPS`,
        '≤ 1×',
        { row: find(rows, 'h2 tunnel', 'rate', rate), value: cpu },
        { row: find(rows, 'http/1.1 tunnel', 'rate', rate), value: cpu },
        (x) => x <= 1,
      ),
    );
  }
  return targets;
}
