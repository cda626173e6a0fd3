import {
  type ClaimInput,
  type ClaimResult,
  type HeldLease,
  type NodeAnnouncement,
  type NodeRecord,
  RegistryError,
  RegistryErrorCode,
  type ReplicaClaimResult,
  type ReplicaSet,
  type ReplicaSetRegistry,
  type SessionRecord,
  type SessionRegistry,
} from '@tunnel2/registry';
import type { PrimaryMessage, RegistryMethod, WorkerMessage } from './worker-messages.js';

/** The worker's end of its IPC channel to the primary. */
export interface WorkerChannel {
  send(message: WorkerMessage): void;
  /** Registers a handler for every message from the primary; returns an unregister. */
  onMessage(handler: (message: PrimaryMessage) => void): () => void;
}

export interface IpcRegistryOptions {
  /** A call the primary has not answered in this time rejects as unavailable (the primary is stuck). */
  timeoutMs?: number;
  /** Calls waiting for an answer at most; one more rejects at once rather than queueing without bound. */
  maxPending?: number;
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

const knownCodes: ReadonlySet<string> = new Set(Object.values(RegistryErrorCode));

/**
 * The registry a worker sees: every call goes to the primary's registry over IPC and back. Its errors are
 * the registry's own (the same codes), so the edge treats it as it treats Redis: a primary that does not
 * answer in time is an unavailable store.
 */
export class IpcRegistry implements SessionRegistry, ReplicaSetRegistry {
  readonly #channel: WorkerChannel;
  readonly #timeoutMs: number;
  readonly #maxPending: number;
  readonly #pending = new Map<number, Pending>();
  readonly #unsubscribe: () => void;
  #nextId = 1;
  #closed = false;

  constructor(channel: WorkerChannel, options: IpcRegistryOptions = {}) {
    this.#channel = channel;
    this.#timeoutMs = options.timeoutMs ?? 5_000;
    this.#maxPending = options.maxPending ?? 10_000;
    this.#unsubscribe = channel.onMessage((message) => {
      if (message.t !== 'registry-reply') return;
      const pending = this.#pending.get(message.id);
      if (pending === undefined) return; // timed out meanwhile
      this.#pending.delete(message.id);
      clearTimeout(pending.timer);
      if (message.ok) pending.resolve(message.value);
      else {
        const code =
          message.code !== undefined && knownCodes.has(message.code)
            ? (message.code as RegistryErrorCode)
            : RegistryErrorCode.UNAVAILABLE;
        pending.reject(new RegistryError(code, message.message));
      }
    });
  }

  #call<T>(method: RegistryMethod, args: unknown[]): Promise<T> {
    if (this.#closed) {
      return Promise.reject(new RegistryError(RegistryErrorCode.CLOSED, 'the registry is closed'));
    }
    if (this.#pending.size >= this.#maxPending) {
      return Promise.reject(
        new RegistryError(
          RegistryErrorCode.UNAVAILABLE,
          `the primary's registry has ${this.#pending.size} calls unanswered`,
        ),
      );
    }
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(
          new RegistryError(
            RegistryErrorCode.UNAVAILABLE,
            `the primary's registry did not answer ${method} within ${this.#timeoutMs} ms`,
          ),
        );
      }, this.#timeoutMs);
      timer.unref();
      this.#pending.set(id, { resolve: resolve as (value: unknown) => void, reject, timer });
      try {
        this.#channel.send({ t: 'registry', id, method, args });
      } catch (err) {
        this.#pending.delete(id);
        clearTimeout(timer);
        reject(
          new RegistryError(RegistryErrorCode.UNAVAILABLE, 'the primary cannot be reached', { cause: err }),
        );
      }
    });
  }

  claim(input: ClaimInput): Promise<ClaimResult> {
    return this.#call('claim', [input]);
  }
  renew(name: string, epoch: number, ttlMs: number): Promise<boolean> {
    return this.#call('renew', [name, epoch, ttlMs]);
  }
  renewMany(leases: readonly HeldLease[], ttlMs: number): Promise<boolean[]> {
    return this.#call('renewMany', [leases, ttlMs]);
  }
  markDisconnected(name: string, epoch: number, graceMs: number): Promise<boolean> {
    return this.#call('markDisconnected', [name, epoch, graceMs]);
  }
  release(name: string, epoch: number): Promise<boolean> {
    return this.#call('release', [name, epoch]);
  }
  async lookup(name: string): Promise<SessionRecord | undefined> {
    // undefined does not survive JSON: the primary sends null for "none".
    return (await this.#call<SessionRecord | null>('lookup', [name])) ?? undefined;
  }
  list(): Promise<SessionRecord[]> {
    return this.#call('list', []);
  }
  listOwned(account: string, space: string): Promise<SessionRecord[]> {
    return this.#call('listOwned', [account, space]);
  }
  async announceNode(announcement: NodeAnnouncement): Promise<void> {
    await this.#call('announceNode', [announcement]);
  }
  async lookupNode(nodeId: string): Promise<NodeRecord | undefined> {
    return (await this.#call<NodeRecord | null>('lookupNode', [nodeId])) ?? undefined;
  }
  withdrawNode(nodeId: string): Promise<boolean> {
    return this.#call('withdrawNode', [nodeId]);
  }
  async ping(): Promise<void> {
    await this.#call('ping', []);
  }
  claimReplica(input: ClaimInput): Promise<ReplicaClaimResult> {
    return this.#call('claimReplica', [input]);
  }
  renewReplica(name: string, nodeId: string, epoch: number, ttlMs: number): Promise<boolean> {
    return this.#call('renewReplica', [name, nodeId, epoch, ttlMs]);
  }
  releaseReplica(name: string, nodeId: string, epoch: number): Promise<boolean> {
    return this.#call('releaseReplica', [name, nodeId, epoch]);
  }
  async lookupReplicas(name: string): Promise<ReplicaSet | undefined> {
    return (await this.#call<ReplicaSet | null>('lookupReplicas', [name])) ?? undefined;
  }

  /** Rejects what still waits; the primary's registry itself stays open (it is the primary's). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#unsubscribe();
    for (const [id, pending] of this.#pending) {
      this.#pending.delete(id);
      clearTimeout(pending.timer);
      pending.reject(new RegistryError(RegistryErrorCode.CLOSED, 'the registry is closed'));
    }
  }
}
