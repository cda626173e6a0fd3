import { isMainThread, parentPort } from 'node:worker_threads';
import { endEchoedCtrlC } from './ctrl-c-echo.js';

/**
 * Calls `onSignal` on SIGINT/SIGTERM. In the bin's worker the signals arrive from the main thread as
 * messages, since only the main thread receives process signals (and the bin ends the line of an echoed
 * ^C itself). Returns a function that stops listening.
 */
export function onShutdownSignal(onSignal: (signal: string) => void): () => void {
  if (isMainThread || parentPort === null) {
    const handler = (signal: NodeJS.Signals): void => {
      if (signal === 'SIGINT') endEchoedCtrlC();
      onSignal(signal);
    };
    process.on('SIGINT', handler);
    process.on('SIGTERM', handler);
    return () => {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
    };
  }
  const port = parentPort;
  const handler = (message: unknown): void => {
    if (
      typeof message === 'object' &&
      message !== null &&
      (message as { type?: unknown }).type === 'signal'
    ) {
      onSignal(String((message as { signal?: unknown }).signal));
    }
  };
  port.on('message', handler);
  return () => {
    port.off('message', handler);
    port.unref();
  };
}
