import { type Logger, pino } from 'pino';
import { AgentError } from '../errors.js';
import { createLineWriter, type LineOutput } from '../line-writer.js';
import { createHumanReporter, createJsonReporter, type Reporter } from '../reporter.js';
import { onShutdownSignal } from '../shutdown-signal.js';
import type { Tunnel } from '../tunnel.js';

/** What every tunnel command (`http`, `tcp`) writes to: stdout lines, stderr, and the diagnostic log. */
export interface CommandOutput {
  stdout: LineOutput;
  reporter: Reporter;
  logger: Logger;
  json: boolean;
}

function commandOutput(options: { json?: boolean; logLevel?: string }): CommandOutput {
  const stdout = createLineWriter(process.stdout);
  const writeErr = (line: string): void => void process.stderr.write(line);
  const reporter = options.json ? createJsonReporter(stdout) : createHumanReporter(stdout, writeErr);
  // Tokens and credentials never reach the log, whatever a debug line carries.
  const redact = {
    paths: ['authorization', 'token', '*.authorization', '*.token', 'headers.authorization'],
    censor: '<redacted>',
  };
  const logger = pino({ level: options.logLevel ?? 'warn', redact }, pino.destination(2));
  return { stdout, reporter, logger, json: options.json === true };
}

/** `--allow-ip a,b` as a list. */
export function allowIpList(value: string | undefined): string[] | undefined {
  return value
    ?.split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/**
 * A tunnel command from start to exit status: builds the tunnel (an invalid option is reported, exit 1),
 * lets the command subscribe to its events, then runs it until Ctrl-C (exit 0) or a refusal retrying
 * cannot fix (exit 1). `onStartFailure` hears what start() rejected with.
 */
export async function runTunnelCommand(
  options: { json?: boolean; logLevel?: string },
  create: (logger: Logger) => Tunnel,
  /** `output`: for a command that reports several tunnels, each with its own reporter. */
  subscribe: (tunnel: Tunnel, reporter: Reporter, output: CommandOutput) => void,
  onStartFailure?: (err: unknown, reporter: Reporter) => void,
): Promise<number> {
  const output = commandOutput(options);
  let tunnel: Tunnel;
  try {
    tunnel = create(output.logger);
  } catch (err) {
    if (err instanceof AgentError) {
      output.reporter.error(err);
      return 1;
    }
    throw err;
  }
  subscribe(tunnel, output.reporter, output);
  const { reporter, stdout } = output;
  tunnel.on('reconnecting', (event) => reporter.reconnecting(event));
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (code: number): void => {
      if (stopping) return;
      stopping = true;
      stopListening();
      void tunnel.close().then(() => {
        reporter.closed();
        stdout.flush();
        resolve(code);
      });
    };
    const stopListening = onShutdownSignal(() => stop(0));
    tunnel.on('error', (error: AgentError) => {
      reporter.error(error);
      // A refusal retrying cannot fix (bad token, name taken over): stop with a failure status.
      if (error.fatal) stop(1);
    });
    // What start() rejects with: refusals were already reported through 'error'.
    tunnel.start().catch((err: unknown) => {
      onStartFailure?.(err, reporter);
      stop(1);
    });
  });
}
