import { readFileSync } from 'node:fs';
import { runEdgeCommand } from './edge-server.js';

// The container's entry point (`tunnel2-edge`): the edge alone, no CLI. It runs on the main thread, so as
// PID 1 it receives SIGTERM itself and drains before exiting.
const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

const onShutdownSignal = (handler: (signal: string) => void): (() => void) => {
  const listener = (signal: NodeJS.Signals): void => handler(signal);
  process.on('SIGTERM', listener);
  process.on('SIGINT', listener);
  return () => {
    process.off('SIGTERM', listener);
    process.off('SIGINT', listener);
  };
};

// SIGHUP reloads the TLS certificates (registered only when the edge serves TLS).
const onReloadSignal = (handler: () => void): (() => void) => {
  const listener = (): void => handler();
  process.on('SIGHUP', listener);
  return () => process.off('SIGHUP', listener);
};

const code = await runEdgeCommand({
  argv: process.argv.slice(2),
  env: process.env,
  command: 'tunnel2-edge',
  version,
  columns: process.stdout.isTTY ? process.stdout.columns : undefined,
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  onShutdownSignal,
  onReloadSignal,
});
// Exits explicitly: after a drain nothing should be left, but a second signal means "now", and a stopping
// container must not wait for a handle some library left open.
process.exit(code);
