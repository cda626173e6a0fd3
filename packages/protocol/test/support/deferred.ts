/** A promise with its resolver exposed, so callbacks can signal the test (ES2023 lib: no withResolvers). */
export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(reason: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/**
 * Resolves after the event-loop turn in which every setImmediate queued so far has run. The session
 * flushes its outbound batch from a setImmediate, so this waits for a known event, not for time.
 */
export function afterQueuedImmediates(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
