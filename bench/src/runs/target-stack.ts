import { BenchError, BenchErrorCode } from '../errors.js';
import type { BenchOptions } from '../plan/cli-args.js';
import {
  type BenchStack,
  type LoadTarget,
  startAgentService,
  startBenchStack,
  startEdgeService,
  targetOf,
} from '../stacks/bench-stack.js';
import type { ChildService } from '../stacks/child-service.js';
import type { PreflightSide } from './preflight.js';

/** The stack a staged scenario measures: the kit's own, or one around the user's service or tunnel. */
export type ScenarioStack = Omit<BenchStack, 'backend' | 'direct'> & {
  /** The test backend; undefined when the user's --target is the backend (it is not the kit's to meter). */
  backend: ChildService | undefined;
  /** Undefined with --tunnel-url alone: there is no direct side. */
  direct: LoadTarget | undefined;
};

/** The origin the kit's own agent forwards to: the target without its path (the path is per request). */
const originOf = (url: string): string => new URL(url).origin;

/**
 * Starts what a run needs and nothing more. Without --target and --tunnel-url: the test backend, an edge
 * and an agent, as always. With --target: no backend; an edge and an agent in front of the target when the
 * tunnel side runs and no --tunnel-url is given. With --tunnel-url: nothing for the tunnel side.
 */
export async function startScenarioStack(options: BenchOptions): Promise<ScenarioStack> {
  const tunnelSide = options.sides.includes('tunnel');
  if (options.targetUrl === null && options.tunnelUrl === null) {
    return startBenchStack({ tunnel: tunnelSide, inspect: options.inspect, replicas: options.replicas });
  }
  const started: ChildService[] = [];
  const closeAll = async (): Promise<void> => {
    for (const service of started.splice(0).reverse()) await service.stop();
  };
  let edge: ChildService | undefined;
  let agent: ChildService | undefined;
  let agentInspectorOff: ChildService | undefined;
  try {
    if (tunnelSide && options.tunnelUrl === null && options.targetUrl !== null) {
      const backend = originOf(options.targetUrl);
      // The load generator and the direct side never check the target's certificate (a dev server's
      // self-signed one is the usual case): the kit's agent does not either, or only the tunnel side fails.
      const insecure = agentSkipsCertificateCheck(options);
      edge = await startEdgeService();
      started.push(edge);
      agent = await startAgentService(backend, edge.readyValue, 'bench', options.inspect !== 'off', insecure);
      started.push(agent);
      if (options.inspect === 'both') {
        agentInspectorOff = await startAgentService(
          backend,
          edge.readyValue,
          'bench-noinspect',
          false,
          insecure,
        );
        started.push(agentInspectorOff);
      }
    }
  } catch (err) {
    await closeAll();
    if (err instanceof BenchError) throw err;
    throw new BenchError(BenchErrorCode.STACK, 'the edge and agent in front of --target did not start', {
      cause: err,
    });
  }
  const tunnelUrl = options.tunnelUrl ?? agent?.readyValue ?? null;
  return {
    backend: undefined,
    edge,
    agent,
    direct: options.targetUrl === null ? undefined : targetOf(options.targetUrl),
    tunnel: tunnelUrl === null ? undefined : targetOf(tunnelUrl),
    ...(agentInspectorOff === undefined
      ? {}
      : { agentInspectorOff, tunnelInspectorOff: targetOf(agentInspectorOff.readyValue) }),
    describe: () => ({
      backendUrl: options.targetUrl ?? '',
      edgeUrl: edge?.readyValue ?? null,
      tunnelUrl,
    }),
    close: closeAll,
    kill: () => {
      for (const service of started) service.kill();
    },
  };
}

/** Whether the kit starts its own agent in front of an https:// --target (it then runs with --insecure). */
function agentSkipsCertificateCheck(options: {
  targetUrl: string | null;
  tunnelUrl: string | null;
}): boolean {
  return options.targetUrl?.startsWith('https:') === true && options.tunnelUrl === null;
}

/** --target's direct side, checked before anything starts: a service that is down fails in a second. */
export function targetSide(options: BenchOptions): PreflightSide | undefined {
  if (options.targetUrl === null || !options.sides.includes('direct')) return undefined;
  return { side: 'direct', target: targetOf(options.targetUrl), url: options.targetUrl };
}

/** The sides to check once the stack runs (all but --target's direct side), named by the URL the user knows. */
export function stackSides(options: BenchOptions, stack: ScenarioStack): PreflightSide[] {
  const described = stack.describe();
  const sides: PreflightSide[] = [];
  if (options.sides.includes('direct') && options.targetUrl === null && stack.direct !== undefined) {
    sides.push({ side: 'direct', target: stack.direct, url: described.backendUrl });
  }
  if (options.sides.includes('tunnel') && stack.tunnel !== undefined && described.tunnelUrl !== null) {
    sides.push({
      side: 'tunnel',
      target: stack.tunnel,
      url: described.tunnelUrl,
      // The kit's own agent: a tunnel2 error answer from it means it could not reach the target.
      ...(options.tunnelUrl === null && options.targetUrl !== null ? { agentTarget: options.targetUrl } : {}),
    });
  }
  return sides;
}
