import { writeSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import { type Logger, pino } from 'pino';
import { loadAgentKey } from '../config/agent-key.js';
import { AgentError, USAGE_ERRORS } from '../errors.js';
import type { Tunnel } from '../session/tunnel.js';
import type { InFlightUnit } from '../terminal/in-flight-text.js';
import { createLineWriter, droppedText, type LineWriter } from '../terminal/line-writer.js';
import { diagnosticLogDestination } from '../terminal/log-destination.js';
import {
  createHumanReporter,
  createJsonReporter,
  type InFlightCut,
  jsonDroppedLine,
  type Reporter,
} from '../terminal/reporter.js';
import { onShutdownSignal } from '../terminal/shutdown-signal.js';
import { createStatusScreen, type StatusScreen, terminalReset } from '../terminal/status-screen.js';
import { onStdoutClosed } from '../terminal/stdout-closed.js';
import { stdoutTerminal, unblockStdoutTerminal } from '../terminal/terminal.js';
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
  if (isMainThread) {
    // An exit that does not come through the command's own end (an uncaught error, process.exit from
    // elsewhere, the CLI's one-second backstop): the request lines still batched are handed to stdout
    // first. Node writes a pipe at once as far as it has room, so a reader that keeps up gets them.
    process.once('exit', () => stdout.flush());
  }
  const terminal = options.json || options.tty === false ? undefined : stdoutTerminal();
  // no-color.org: a non-empty NO_COLOR turns colours off.
  const colour = options.color !== false && !process.env.NO_COLOR;
  const screen =
    terminal === undefined ? undefined : createStatusScreen({ out: stdout, err: writeErr, terminal, colour });
  if (screen !== undefined && isMainThread) {
    // However the process ends (an uncaught error, an exit from elsewhere), the shell gets its terminal back
    // as it was: written at once, since the view's own writes to a terminal are asynchronous (terminal.ts).
    process.once('exit', () => {
      if (screen.active) writeSync(1, terminalReset(colour));
    });
  }
  const reporter = options.json
    ? createJsonReporter(stdout)
    : (screen ?? createHumanReporter(stdout, writeErr));
  // Tokens and credentials never reach the log, whatever a debug line carries.
  const redact = {
    paths: ['authorization', 'token', '*.authorization', '*.token', 'headers.authorization'],
    censor: '<redacted>',
  };
  const logger = pino({ level: options.logLevel ?? 'warn', redact }, diagnosticLogDestination());
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

/** What a tunnel and the tunnels its session carries count in flight: requests, connections, or both. */
function inFlightUnit(tunnel: Tunnel): InFlightUnit {
  const tcp = [tunnel, ...tunnel.tunnels].map((t) => t.target.origin.startsWith('tcp:'));
  if (tcp.every(Boolean)) return 'connections';
  return tcp.some(Boolean) ? 'requests and connections' : 'requests';
}

/** How long the first Ctrl-C (or SIGTERM) lets requests in flight finish. */
const GRACE_MS = 5_000;

/** The exit status of a process stopped by a signal, as a shell reports it (SIGINT 130, SIGTERM 143). */
const SIGNAL_EXIT: Readonly<Record<string, number>> = { SIGINT: 130, SIGTERM: 143 };

/**
 * A tunnel command from start to exit status: builds the tunnel (an invalid target or option is reported, exit 2),
 * lets the command subscribe to its events, then runs it until Ctrl-C or a refusal retrying cannot fix
 * (exit 1). The first Ctrl-C (or SIGTERM) lets the requests in flight finish, saying so, and exits 0; a
 * second one stops at once, saying what it cut, with the status of a process ended by that signal (130).
 * `onStartFailure` hears what start() rejected with.
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
    let exitCode = 0;
    let cut: InFlightCut | undefined;
    const inFlight = (): number => tunnel.sessionStats?.openStreams ?? 0;
    const stop = (code: number): void => {
      if (stopping) return;
      stopping = true;
      exitCode = code;
      // The grace is timed here, so that what its end cuts is counted and said (the tunnel's own, later,
      // is only a backstop).
      const grace = setTimeout(() => {
        const open = inFlight();
        if (open === 0 || cut !== undefined) return;
        cut = { count: open, unit: inFlightUnit(tunnel), afterMs: GRACE_MS };
        void tunnel.close(0);
      }, GRACE_MS);
      void tunnel.close(2 * GRACE_MS).then(() => {
        clearTimeout(grace);
        // Heard until the end: a second signal that found no listener would end the process by default,
        // with nothing said and the terminal left in the view's state.
        stopListening();
        // The closing line is the last: a request or connection cut by the close may report after it (the
        // reporters of `tunnel2 start`'s tunnels, one each, hear no closed() of their own).
        for (const t of [tunnel, ...tunnel.tunnels]) {
          t.removeAllListeners('request');
          t.removeAllListeners('connection');
        }
        // The request lines still batched for stdout go before the closing line, which goes to stderr.
        stdout.flush();
        reporter.closed(cut);
        stdout.flush();
        stopWatchingStdout();
        resolve(exitCode);
      });
    };
    const stopListening = onShutdownSignal((signal) => {
      if (!stopping) {
        const open = inFlight();
        if (open > 0) reporter.finishing(open, inFlightUnit(tunnel), signal);
        stop(0);
      } else if (cut === undefined) {
        // The second: what the first let finish is cut now (the clients hear a reset, not a hang).
        cut = { count: inFlight(), unit: inFlightUnit(tunnel) };
        exitCode = SIGNAL_EXIT[signal] ?? 130;
        void tunnel.close(0);
      }
    });
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
