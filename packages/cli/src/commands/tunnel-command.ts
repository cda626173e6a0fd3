import { type Logger, pino } from 'pino';
import { loadAgentKey } from '../agent-key.js';
import { AgentError, USAGE_ERRORS } from '../errors.js';
import { createLineWriter, droppedText, type LineWriter } from '../line-writer.js';
import { createHumanReporter, createJsonReporter, jsonDroppedLine, type Reporter } from '../reporter.js';
import { onShutdownSignal } from '../shutdown-signal.js';
import { createStatusScreen, type StatusScreen } from '../status-screen.js';
import { onStdoutClosed } from '../stdout-closed.js';
import { stdoutTerminal, unblockStdoutTerminal } from '../terminal.js';
import type { Tunnel } from '../tunnel.js';
import { hintWhenNoEdge } from './edge-hint.js';

/** What every tunnel command (`http`, `tcp`) writes to: stdout lines, stderr, and the diagnostic log. */
export interface CommandOutput {
  stdout: LineWriter;
  reporter: Reporter;
  logger: Logger;
  /** On a terminal: the status header, which reads the tunnel's live figures. */
  screen?: StatusScreen | undefined;
  json: boolean;
}

/** The output flags every tunnel command takes. */
export interface OutputOptions {
  json?: boolean;
  logLevel?: string;
  /** `--no-tty`: the plain line log even on a terminal. */
  tty?: boolean;
  /** `--no-color`: no colours on a terminal (as NO_COLOR does). */
  color?: boolean;
}

function commandOutput(options: OutputOptions): CommandOutput {
  const writeErr = (line: string): void => void process.stderr.write(line);
  unblockStdoutTerminal();
  const stdout = createLineWriter(process.stdout, {
    droppedLine: options.json ? jsonDroppedLine : droppedText,
    warn: writeErr,
  });
  const terminal = options.json || options.tty === false ? undefined : stdoutTerminal();
  // no-color.org: a non-empty NO_COLOR turns colours off.
  const colour = options.color !== false && !process.env.NO_COLOR;
  const screen =
    terminal === undefined ? undefined : createStatusScreen({ out: stdout, err: writeErr, terminal, colour });
  const reporter = options.json
    ? createJsonReporter(stdout)
    : (screen ?? createHumanReporter(stdout, writeErr));
  // Tokens and credentials never reach the log, whatever a debug line carries.
  const redact = {
    paths: ['authorization', 'token', '*.authorization', '*.token', 'headers.authorization'],
    censor: '<redacted>',
  };
  const logger = pino({ level: options.logLevel ?? 'warn', redact }, pino.destination(2));
  return { stdout, reporter, logger, screen, json: options.json === true };
}

/**
 * The agent key a token-less run identifies itself with: the one kept in the user's config directory, so a
 * restart reclaims its names at once. With a token (flag, env or file) the token is the identity: no file.
 */
export function cliAgentKey(token: string | undefined): string | undefined {
  if (token !== undefined && token !== '') return undefined;
  return loadAgentKey({ warn: (line) => void process.stderr.write(`tunnel2: ${line}\n`) }).key;
}

/** `--allow-ip a,b` as a list. */
export function allowIpList(value: string | undefined): string[] | undefined {
  return value
    ?.split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/**
 * A tunnel command from start to exit status: builds the tunnel (an invalid target or option is reported, exit 2),
 * lets the command subscribe to its events, then runs it until Ctrl-C (exit 0) or a refusal retrying
 * cannot fix (exit 1). `onStartFailure` hears what start() rejected with.
 */
export async function runTunnelCommand(
  options: OutputOptions,
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
      // A usage error (a target or flag as typed) exits 2, as a shell's own usage errors do.
      return USAGE_ERRORS.has(err.code) ? 2 : 1;
    }
    throw err;
  }
  // A reader of stdout that goes away (`| head -1`) ends the lines, not the tunnel.
  const stopWatchingStdout = onStdoutClosed((code) => output.stdout.close(code));
  subscribe(tunnel, output.reporter, output);
  // The target's scheme is how a Tunnel tells TCP from HTTP (see Tunnel.target).
  output.screen?.watch(tunnel, tunnel.target.origin.startsWith('tcp:') ? 'connections' : 'requests');
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
        stopWatchingStdout();
        resolve(code);
      });
    };
    const stopListening = onShutdownSignal(() => stop(0));
    tunnel.on('error', (error: AgentError) => {
      reporter.error(error);
      // A refusal retrying cannot fix (bad token, name taken over): stop with a failure status.
      if (error.fatal) stop(1);
    });
    hintWhenNoEdge(tunnel, reporter);
    // What start() rejects with: refusals were already reported through 'error'.
    tunnel.start().catch((err: unknown) => {
      onStartFailure?.(err, reporter);
      stop(1);
    });
  });
}
