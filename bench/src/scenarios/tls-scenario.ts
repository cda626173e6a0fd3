import { rm } from 'node:fs/promises';
import { autocannonRowLoad } from '../measure/autocannon-row-load.js';
import { runH2Paced } from '../measure/h2-paced-client.js';
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
  type LoadTarget,
  startAgentService,
  startBenchStack,
  startEdgeService,
  targetOf,
} from '../stacks/bench-stack.js';
import type { ChildService } from '../stacks/child-service.js';
import {
  makeCertificate,
  startTlsTerminator,
  type TlsFiles,
  type TlsTerminator,
} from '../stacks/tls-terminator.js';

/*
 * `pnpm bench tls`: what TLS costs at the edge (tunnel2 server --tls-cert/--tls-key) against the same edge
 * behind HAProxy terminating TLS in a process of its own, at the same fixed rate of HTTPS keep-alive
 * requests (autocannon, HTTP/1.1), then over h2 (ALPN; the paced node:http2 client; HAProxy speaks h2c to
 * the edge). "Between" CPU is the TLS-terminating part: the edge alone, or HAProxy + the edge; the agent
 * and the backend are the same in both and reported beside. The plain edge without TLS is a row of its
 * own, for what TLS adds at all.
 */

export interface TlsSettings {
  rates: number[];
  durationSec: number;
  warmupSec: number;
  path: string;
}

export type TlsResult = SideBySideResult<TlsSettings>;

const TIMEOUT_SEC = 10;
/** h2 rows: sessions of the paced client, and streams each may have open (as `pnpm bench h2`'s defaults). */
const H2_CONNECTIONS = 10;
const H2_STREAMS = 10;

function autocannonLoad(target: LoadTarget, path: string, rate: number, seconds: number): Promise<RowLoad> {
  return autocannonRowLoad({
    target,
    path,
    connections: autoConnections(rate),
    durationSec: seconds,
    ratePerSec: rate,
    timeoutSec: TIMEOUT_SEC,
  });
}

function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  const stderr = text.indexOf('stderr: ');
  return (stderr >= 0 ? text.slice(stderr + 8) : text).split('\n')[0]!.slice(0, 300);
}

interface TlsEdge {
  edge: ChildService;
  agent: ChildService;
  target: LoadTarget;
}

/** The edge serving TLS itself, and an agent on it over wss:// trusting the test certificate. */
async function startTlsEdge(
  files: TlsFiles,
  backendUrl: string,
  started: ChildService[],
): Promise<TlsEdge | string> {
  let edge: ChildService;
  try {
    edge = await startEdgeService(['--tls-cert', files.certPath, '--tls-key', files.keyPath]);
  } catch (err) {
    return `the edge did not start with --tls-cert/--tls-key (${firstLine(err)})`;
  }
  started.push(edge);
  const agent = await startAgentService(backendUrl, edge.readyValue, 'bench-tls', undefined, false, [], {
    NODE_EXTRA_CA_CERTS: files.certPath,
  });
  started.push(agent);
  const target = targetOf(agent.readyValue);
  if (!target.origin.startsWith('https:')) {
    return `the edge with --tls-cert announced ${agent.readyValue}, not an https:// tunnel`;
  }
  return { edge, agent, target };
}

export async function runTlsBench(settings: TlsSettings, note: (line: string) => void): Promise<TlsResult> {
  const started: ChildService[] = [];
  let bench: BenchStack | undefined;
  let files: TlsFiles | undefined;
  let haproxy: TlsTerminator | undefined;
  try {
    files = await makeCertificate();
    bench = await startBenchStack({ tunnel: true, subdomain: 'bench-plain' });
    const plainEdge = bench.edge!;
    haproxy = await startTlsTerminator(files, Number(new URL(plainEdge.readyValue).port));
    const tlsEdge = await startTlsEdge(files, bench.backend.readyValue, started);
    const tlsMissing = typeof tlsEdge === 'string' ? tlsEdge : null;
    if (tlsMissing !== null) note(`${tlsMissing}: no TLS-at-the-edge row`);
    const plain = bench.tunnel!;
    const behindHaproxy: LoadTarget = { origin: haproxy.url, host: plain.host };
    const backend: MeteredProcess = { name: 'backend', pid: bench.backend.pid, between: false };
    const plainProcs = (between: boolean): MeteredProcess[] => [
      { name: 'edge', pid: plainEdge.pid, between },
      { name: 'agent', pid: bench!.agent!.pid, between: false },
      backend,
    ];
    const tlsEdgeProcs: MeteredProcess[] =
      typeof tlsEdge === 'string'
        ? []
        : [
            { name: 'edge', pid: tlsEdge.edge.pid, between: true },
            { name: 'agent', pid: tlsEdge.agent.pid, between: false },
            backend,
          ];
    const rows: SideBySideRow[] = [];
    const run = async (
      spec: RowSpec,
      procs: MeteredProcess[],
      target: LoadTarget | undefined,
      missing: string | null,
    ): Promise<void> => {
      if (missing !== null || target === undefined) {
        rows.push(unavailableRow(spec, missing ?? 'not started'));
        return;
      }
      const rate = spec.targetRps!;
      const load = (seconds: number): Promise<RowLoad> =>
        spec.generator === 'node:http2'
          ? runH2Paced({
              origin: target.origin,
              authority: target.host,
              path: settings.path,
              connections: spec.connections,
              maxStreamsPerConnection: H2_STREAMS,
              ratePerSec: rate,
              durationSec: seconds,
              timeoutSec: TIMEOUT_SEC,
            })
          : autocannonLoad(target, settings.path, rate, seconds);
      if (settings.warmupSec > 0) await load(settings.warmupSec);
      const row = await measureRow(spec, procs, () => load(settings.durationSec));
      rows.push(row);
      note(
        `${row.label}, ${rowLoadText(row)}: ${fixed(row.rps)} rps, ${errorTotal(row)} errors, p99 ` +
          `${fixed(row.latencyMs.p99, 2)} ms, terminating CPU ${fixed(row.betweenCpuPerRequestUs)} µs/req ` +
          `(${Object.entries(row.cpuPerRequestUs)
            .map(([name, us]) => `${name} ${fixed(us)}`)
            .join(', ')})`,
      );
    };
    for (const rate of settings.rates) {
      const spec = (label: string, protocol: string, side: string): RowSpec => ({
        label,
        protocol,
        side,
        mode: 'rate',
        targetRps: rate,
        connections: autoConnections(rate),
        streams: null,
        generator: 'autocannon',
      });
      await run(spec('http plain edge (no TLS)', 'http/1.1', 'plain'), plainProcs(true), plain, null);
      await run(
        spec('https TLS at the edge', 'http/1.1 over TLS', 'edge'),
        tlsEdgeProcs,
        typeof tlsEdge === 'string' ? undefined : tlsEdge.target,
        tlsMissing,
      );
      await run(
        spec('https HAProxy + edge', 'http/1.1 over TLS', 'haproxy'),
        [{ name: 'haproxy', pid: haproxy.pid, between: true }, ...plainProcs(true)],
        behindHaproxy,
        null,
      );
      // The same rate over h2 (ALPN), paced by the node:http2 client: the edge's own TLS and HTTP/2 against
      // HAProxy's TLS and HTTP/2 in front of the edge's h2c.
      await run(
        { ...spec('h2 TLS at the edge', 'h2', 'edge'), connections: H2_CONNECTIONS, generator: 'node:http2' },
        tlsEdgeProcs,
        typeof tlsEdge === 'string' ? undefined : tlsEdge.target,
        tlsMissing,
      );
      await run(
        {
          ...spec('h2 HAProxy + edge', 'h2', 'haproxy'),
          connections: H2_CONNECTIONS,
          generator: 'node:http2',
        },
        [{ name: 'haproxy', pid: haproxy.pid, between: true }, ...plainProcs(true)],
        behindHaproxy,
        null,
      );
    }
    return {
      scenario: 'tls',
      settings,
      stack: {
        backendUrl: bench.backend.readyValue,
        plainEdgeUrl: plainEdge.readyValue,
        haproxyUrl: haproxy.url,
        tlsEdgeUrl: typeof tlsEdge === 'string' ? null : tlsEdge.edge.readyValue,
      },
      rows,
      targets: tlsTargets(rows, settings),
    };
  } finally {
    for (const service of started.reverse()) await service.stop();
    await haproxy?.stop();
    await bench?.close();
    if (files !== undefined) await rm(files.dir, { recursive: true, force: true });
  }
}

export function tlsTargets(rows: SideBySideRow[], settings: TlsSettings): SideBySideTarget[] {
  const failed = rows.reduce((sum, row) => sum + errorTotal(row), 0);
  const cpu = (row: SideBySideRow): number | null => row.betweenCpuPerRequestUs;
  const find = (label: string, rate: number) => rows.find((r) => r.label === label && r.targetRps === rate);
  return [
    {
      name: 'failed requests, all rows',
      limit: '0',
      measured: failed,
      text: String(failed),
      met: failed === 0,
      unavailable: null,
    },
    ...settings.rates.flatMap((rate) =>
      (['https', 'h2'] as const).map((protocol) =>
        ratioTarget(
          `${protocol === 'h2' ? 'h2: ' : ''}CPU per request at ${rate} RPS, TLS at the edge / (HAProxy + edge)`,
          '< 1×',
          { row: find(`${protocol} TLS at the edge`, rate), value: cpu },
          { row: find(`${protocol} HAProxy + edge`, rate), value: cpu },
          (x) => x < 1,
        ),
      ),
    ),
  ];
}
