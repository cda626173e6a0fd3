import { BenchError, BenchErrorCode } from '../errors.js';
import { defaultInspectMode } from '../plan/cli-args.js';
import type { InspectMode } from '../plan/report-schema.js';
import { runtime } from '../runtime-paths.js';
import { type ChildService, startChildService } from './child-service.js';

/** Where a side of the comparison sends its requests. */
export interface LoadTarget {
  /** Origin the load generator connects to (always a loopback address). */
  origin: string;
  /** Host header to send; the tunnel side is routed by host, as public traffic is. */
  host: string;
}

/** The processes under test, each its own child process so its CPU and memory are its own. */
export interface BenchStack {
  backend: ChildService;
  /** Present unless only the direct side runs. */
  edge: ChildService | undefined;
  agent: ChildService | undefined;
  direct: LoadTarget;
  tunnel: LoadTarget | undefined;
  /**
   * `--replicas N`: the other N-1 agents serving the tunnel's name as replicas (`tunnel2 http --replica`),
   * each in front of its own backend process (the first agent and backend are `agent` and `backend`).
   */
  replicaAgents?: ChildService[];
  replicaBackends?: ChildService[];
  /** `--inspect both`: a second agent on the same edge with its inspector off, and its public target. */
  agentInspectorOff?: ChildService;
  tunnelInspectorOff?: LoadTarget;
  /** A short description of the stack, for the report. */
  describe(): StackDescription;
  close(): Promise<void>;
  /** Synchronous last resort when the bench itself exits. */
  kill(): void;
}

export interface StackDescription {
  backendUrl: string;
  edgeUrl: string | null;
  tunnelUrl: string | null;
}

export interface BenchStackOptions {
  /** Start the edge and the agent (false when only the direct side is measured). */
  tunnel: boolean;
  /** The subdomain the agent asks for. */
  subdomain?: string;
  /**
   * The agent's request inspector: on (default, as for a user; BENCH_INSPECT=off turns it off), off, or both:
   * a second agent with it off, on the same edge and backend, so one run measures the inspector's cost.
   */
  inspect?: InspectMode;
  /** Agents serving the tunnel's name as replicas, each with its own backend (default 1: no replicas). */
  replicas?: number;
}

/** The JSON object of a `{"event": ...}` line when it is that event. */
export function jsonEvent(line: string, event: string): Record<string, unknown> | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    const parsed = JSON.parse(line) as Record<string, unknown>;
    return parsed.event === event ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** The test backend prints one text line with its URL; nothing else it prints starts the same way. */
function backendUrl(line: string): string | undefined {
  const marker = 'listening on ';
  const at = line.indexOf(marker);
  if (at < 0) return undefined;
  const url = line.slice(at + marker.length).split(' ')[0];
  return url !== undefined && URL.canParse(url) ? url.replace(/\/$/, '') : undefined;
}

export function targetOf(url: string): LoadTarget {
  const parsed = new URL(url);
  // *.localhost does not resolve through Node's resolver: connect to loopback and route by Host.
  const hostname =
    parsed.hostname === 'localhost' || parsed.hostname.endsWith('.localhost') ? '127.0.0.1' : parsed.hostname;
  // A URL on its scheme's default port has an empty port: name it, the load generator needs one.
  const port = parsed.port || (parsed.protocol === 'https:' ? '443' : '80');
  return { origin: `${parsed.protocol}//${hostname}:${port}`, host: parsed.host };
}

const cliBin = (): string => runtime.cliBin();

/**
 * Node flags for the edge and the agent only, from TUNNEL2_BENCH_NODE_OPTIONS (space-separated), placed
 * before the script: `--cpu-prof --cpu-prof-dir=/tmp/prof`, `--trace-gc`, `--trace-opt --trace-deopt`.
 * NODE_OPTIONS would also reach the backend and the bench itself, whose costs would then mix in.
 */
export function benchNodeFlags(): string[] {
  return (process.env.TUNNEL2_BENCH_NODE_OPTIONS ?? '').split(/\s+/).filter((flag) => flag !== '');
}

/** The test backend on a free loopback port; its ready value is its URL. */
export function startBackendService(): Promise<ChildService> {
  const backendBin = runtime.testBackendBin();
  return startChildService({
    name: 'test backend',
    args: [backendBin, '--port', '0', '--host', '127.0.0.1'],
    ready: backendUrl,
  });
}

/** `tunnel2 server` on a free loopback port; its ready value is its URL. `env` adds to the bench's own. */
export function startEdgeService(extraArgs: string[] = [], env?: NodeJS.ProcessEnv): Promise<ChildService> {
  return startChildService({
    ...(env === undefined ? {} : { env }),
    name: 'edge (tunnel2 server)',
    args: [
      ...benchNodeFlags(),
      cliBin(),
      'server',
      '--port',
      '0',
      '--host',
      '127.0.0.1',
      '--json',
      '--log-level',
      'warn',
      ...extraArgs,
    ],
    ready: (line) => {
      const url = jsonEvent(line, 'listening')?.url;
      return typeof url === 'string' ? url : undefined;
    },
  });
}

/** `tunnel2 http <backend> --server <edge>`; its ready value is the tunnel's public URL. */
export function startAgentService(
  backendUrl: string,
  edgeUrl: string,
  subdomain: string,
  inspect: boolean = defaultInspectMode() === 'on',
  /** An https:// backend's certificate is not checked (tunnel2 http --insecure). */
  insecure = false,
  /** More flags for `tunnel2 http` (`--h2c` for a gRPC backend, `--replica` for a name several agents serve). */
  extraArgs: readonly string[] = [],
  /** Added to the bench's environment (NODE_EXTRA_CA_CERTS for an edge with a test certificate). */
  env?: NodeJS.ProcessEnv,
): Promise<ChildService> {
  return startChildService({
    ...(env === undefined ? {} : { env }),
    name: 'agent (tunnel2 http)',
    args: [
      ...benchNodeFlags(),
      cliBin(),
      'http',
      backendUrl,
      '--server',
      edgeUrl,
      '--subdomain',
      subdomain,
      '--json',
      '--log-level',
      'warn',
      // The agent's request inspector is on by default, as for a user; BENCH_INSPECT=off measures without it.
      ...(inspect ? ['--inspect', '127.0.0.1:0'] : ['--no-inspect']),
      ...(insecure ? ['--insecure'] : []),
      ...extraArgs,
    ],
    ready: (line) => {
      const url = jsonEvent(line, 'ready')?.url;
      return typeof url === 'string' ? url : undefined;
    },
  });
}

/** Starts the backend, then (for the tunnel side) an edge and an agent, through their real command lines. */
export async function startBenchStack(options: BenchStackOptions): Promise<BenchStack> {
  const started: ChildService[] = [];
  const closeAll = async (): Promise<void> => {
    // Agent first, so the edge never sees a session vanish under load as an error.
    for (const service of started.splice(0).reverse()) await service.stop();
  };
  try {
    const backend = await startBackendService();
    started.push(backend);
    let edge: ChildService | undefined;
    let agent: ChildService | undefined;
    let agentInspectorOff: ChildService | undefined;
    const replicaAgents: ChildService[] = [];
    const replicaBackends: ChildService[] = [];
    const replicas = options.replicas ?? 1;
    if (options.tunnel) {
      edge = await startEdgeService();
      started.push(edge);
      const inspect = options.inspect ?? defaultInspectMode();
      const subdomain = options.subdomain ?? 'bench';
      const on = inspect !== 'off';
      agent = await startAgentService(
        backend.readyValue,
        edge.readyValue,
        subdomain,
        on,
        false,
        // Several agents serve the name: each joins it as a replica.
        replicas > 1 ? ['--replica'] : [],
      );
      started.push(agent);
      for (let i = 1; i < replicas; i++) {
        const own = await startBackendService();
        started.push(own);
        replicaBackends.push(own);
        const replica = await startAgentService(own.readyValue, edge.readyValue, subdomain, on, false, [
          '--replica',
        ]);
        started.push(replica);
        replicaAgents.push(replica);
      }
      if (inspect === 'both') {
        agentInspectorOff = await startAgentService(
          backend.readyValue,
          edge.readyValue,
          `${subdomain}-noinspect`,
          false,
        );
        started.push(agentInspectorOff);
      }
    }
    const tunnelUrl = agent?.readyValue;
    return {
      backend,
      edge,
      agent,
      direct: targetOf(backend.readyValue),
      tunnel: tunnelUrl === undefined ? undefined : targetOf(tunnelUrl),
      ...(replicas > 1 ? { replicaAgents, replicaBackends } : {}),
      ...(agentInspectorOff === undefined
        ? {}
        : { agentInspectorOff, tunnelInspectorOff: targetOf(agentInspectorOff.readyValue) }),
      describe: () => ({
        backendUrl: backend.readyValue,
        edgeUrl: edge?.readyValue ?? null,
        tunnelUrl: tunnelUrl ?? null,
      }),
      close: closeAll,
      kill: () => {
        for (const service of started) service.kill();
      },
    };
  } catch (err) {
    await closeAll();
    if (err instanceof BenchError) throw err;
    throw new BenchError(BenchErrorCode.STACK, 'the stack under test did not start', { cause: err });
  }
}

/** The `tunnel2` executable the stack runs, for a scenario that starts its own agent (`tunnel2 tcp`). */
export function tunnel2Bin(): string {
  return cliBin();
}
