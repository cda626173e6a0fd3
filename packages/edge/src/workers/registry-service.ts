import type { ReplicaSetRegistry, SessionRegistry } from '@tunnel2/registry';
import { type RegistryMethod, registryMethods, type WorkerMessage } from './worker-messages.js';

const methods: ReadonlySet<string> = new Set(registryMethods);

type Reply = (message: {
  t: 'registry-reply';
  id: number;
  ok: boolean;
  value?: unknown;
  code?: string | undefined;
  message?: string;
}) => void;

/**
 * The primary's side of a worker's IpcRegistry: runs one call on the registry the primary holds and sends
 * the answer back. Arguments are checked by the registry itself (it rejects invalid ones with its code);
 * a method that is not a registry call (close included) is refused, so a worker cannot close the registry
 * its siblings share.
 */
export function serveRegistryCall(
  registry: SessionRegistry & ReplicaSetRegistry,
  message: Extract<WorkerMessage, { t: 'registry' }>,
  reply: Reply,
): void {
  const { id, method, args } = message;
  if (!methods.has(method) || !Array.isArray(args)) {
    reply({
      t: 'registry-reply',
      id,
      ok: false,
      code: undefined,
      message: `not a registry call: ${String(method)}`,
    });
    return;
  }
  const call = registry[method as RegistryMethod] as (...values: unknown[]) => Promise<unknown>;
  let answer: Promise<unknown>;
  try {
    answer = call.apply(registry, args);
  } catch (err) {
    answer = Promise.reject(err);
  }
  answer.then(
    // JSON drops undefined: null stands for "none" (IpcRegistry reads it back).
    (value) => reply({ t: 'registry-reply', id, ok: true, value: value ?? null }),
    (err: unknown) =>
      reply({
        t: 'registry-reply',
        id,
        ok: false,
        code:
          (err as { code?: unknown }).code === undefined
            ? undefined
            : String((err as { code?: unknown }).code),
        message: err instanceof Error ? err.message : String(err),
      }),
  );
}
