import { type VersionRange, versionRangesOf } from '@tunnel2/protocol';
import { AgentError, AgentErrorCode } from '../errors.js';

function shown(range: VersionRange): string {
  return range.minVersion === range.maxVersion
    ? `v${range.minVersion}`
    : `v${range.minVersion}..v${range.maxVersion}`;
}

/**
 * The agent and the edge share no protocol version: both ranges named, and which side to upgrade. `edge`
 * comes from the edge's refusal (versionRangesOf) or its HELLO; undefined when it gave neither.
 */
export function versionMismatch(
  agent: VersionRange,
  edge: VersionRange | undefined,
  agentVersion: string,
  cause?: unknown,
): AgentError {
  const advice =
    edge === undefined
      ? 'upgrade the older of the two'
      : edge.maxVersion < agent.minVersion
        ? 'the edge is older: upgrade the edge, or use an agent as old as it'
        : 'this agent is older: upgrade it (npx @tunnel2/cli@latest)';
  return new AgentError(
    AgentErrorCode.VERSION_MISMATCH,
    `this agent (tunnel2 ${agentVersion}) speaks tunnel protocol ${shown(agent)}, ` +
      `the edge ${edge === undefined ? 'another one' : shown(edge)}: ${advice}`,
    { cause, fatal: true },
  );
}

/** The edge's range in its VERSION_UNSUPPORTED GOAWAY reason (it refused us: it is the sender). */
export function edgeRangeOf(reason: string): VersionRange | undefined {
  return versionRangesOf(reason)?.sender;
}
