import { BenchError, BenchErrorCode } from '../errors.js';

/*
 * The non-Node processes the benches run for real (Debian's redis-server and HAProxy) are started by
 * @tunnel2/test-services, shared with the tests; the bench reports a failed start as its own STACK error.
 */

/** Runs `start`; what it throws becomes a STACK error (the cause kept), so the run exits as a stack failure. */
export async function startNative<T>(name: string, start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new BenchError(BenchErrorCode.STACK, `${name} did not start: ${why}`, { cause: err });
  }
}
