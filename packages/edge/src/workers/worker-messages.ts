import { REGISTRY_OPERATIONS, type RegistryOperation } from '../cluster/timed-registry.js';
import type { EdgeSettings } from '../settings/edge-config.js';

// The IPC vocabulary between the primary and its workers (node:cluster's channel, JSON-serialised). Every
// message carries `t` so that either side ignores what is not its own (node:cluster sends its own messages
// on the same channel, with `cmd: 'NODE_...'`).

/**
 * The registry methods a worker may call on the primary's registry: every call the cluster times, the
 * same list (close stays the primary's), so a method added to the registry is carried over IPC once timed.
 */
export const registryMethods = REGISTRY_OPERATIONS;
export type RegistryMethod = RegistryOperation;

/** What a worker needs to start, sent once after the fork (secrets travel over IPC, never in the env). */
export interface WorkerStart {
  t: 'start';
  index: number;
  settings: EdgeSettings;
  /** The cluster secret between workers: the operator's clusterSecret in Redis mode, else a random one. */
  secret: string;
  nodeId: string;
  /** Bind the public, redirect and TCP ports with SO_REUSEPORT (settings' ports are then the ones bound). */
  reusePort: boolean;
}

export type PrimaryMessage =
  | WorkerStart
  | { t: 'registry-reply'; id: number; ok: true; value: unknown }
  | { t: 'registry-reply'; id: number; ok: false; code: string | undefined; message: string }
  | { t: 'metrics'; id: number }
  | { t: 'drain' };

export type WorkerMessage =
  | { t: 'registry'; id: number; method: RegistryMethod; args: unknown[] }
  | {
      t: 'listening';
      url: string;
      nodeId: string;
      linkUrl: string;
      /** The banner's lines (edge-addresses.ts), the same on every worker. */
      addresses: { agentCommand: string; tunnelByHost: string; tunnelByPath: string };
    }
  | { t: 'failed'; message: string }
  | { t: 'metrics-reply'; id: number; body: string; totals: Record<string, number> }
  | { t: 'drained' };

export function isTagged(value: unknown): value is { t: string } {
  return typeof value === 'object' && value !== null && typeof (value as { t?: unknown }).t === 'string';
}
