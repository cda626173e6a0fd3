import { onShutdownSignal } from '../terminal/shutdown-signal.js';
import { VERSION } from '../version.js';

/**
 * `tunnel2 server`: the edge's own command (the same one the container image runs as `tunnel2-edge`), so
 * flags, variables, the config file, --help and --print-config come from one settings table in the edge.
 * The edge is loaded only for this command.
 */
export async function runServerCommand(argv: string[]): Promise<number> {
  const { runEdgeCommand } = await import('@tunnel2/edge');
  return runEdgeCommand({
    argv,
    env: process.env,
    command: 'tunnel2 server',
    version: VERSION,
    columns: process.stdout.isTTY ? process.stdout.columns : undefined,
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    onShutdownSignal,
    // This command runs on the main thread (unless TUNNEL2_WORKER=1): SIGHUP reaches it. Registered by
    // the edge only when it serves TLS (a certificate reload), so it keeps its default action otherwise.
    onReloadSignal: (handler) => {
      const listener = (): void => handler();
      process.on('SIGHUP', listener);
      return () => process.off('SIGHUP', listener);
    },
  });
}
