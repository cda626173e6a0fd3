import { isMainThread, parentPort } from 'node:worker_threads';

/**
 * Calls `onClosed` with the error code (EPIPE) once stdout's reader has gone away
 * (`tunnel2 http 3000 --json | head -1`). Unheard, that write error would end the agent while its tunnel
 * still serves. In the bin's worker the word comes from the main thread, which owns the real stdout
 * (bin/tunnel2.js). Returns a function that stops listening.
 */
export function onStdoutClosed(onClosed: (code: string) => void): () => void {
  if (isMainThread || parentPort === null) {
    let listening = true;
    // Never removed: a write error after the command stopped listening (its last lines, at exit) must not
    // end the process either.
    process.stdout.on('error', (err: NodeJS.ErrnoException) => {
      if (listening) onClosed(err.code ?? err.name);
    });
    // The same reader often had stderr too (`2>&1 | head -1`): nowhere is left to say anything, and what is
    // written there is dropped rather than ending the tunnel.
    process.stderr.on('error', () => {});
    return () => {
      listening = false;
    };
  }
  const port = parentPort;
  const handler = (message: unknown): void => {
    const m = message as { type?: unknown; code?: unknown } | null;
    if (m !== null && typeof m === 'object' && m.type === 'stdout-closed') onClosed(String(m.code));
  };
  port.on('message', handler);
  return () => {
    port.off('message', handler);
    // A listener refs the port; the worker must still be free to exit once the tunnel is closed.
    port.unref();
  };
}
