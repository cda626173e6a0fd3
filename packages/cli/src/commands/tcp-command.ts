import { pino } from 'pino';
import { AgentError, AgentErrorCode } from '../errors.js';
import { createLineWriter } from '../line-writer.js';
import { createHumanReporter, createJsonReporter } from '../reporter.js';
import { onShutdownSignal } from '../shutdown-signal.js';
import { Tunnel } from '../tunnel.js';

export interface TcpCommandOptions {
  server?: string;
  token?: string;
  json?: boolean;
  logLevel?: string;
  remotePort?: string;
  allowIp?: string;
}

function remotePortOf(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const port = Number(value);
  if (!/^\d{1,5}$/.test(value.trim()) || port < 1 || port > 65535) {
    throw new AgentError(AgentErrorCode.INVALID_OPTION, `--remote-port "${value}": a port number 1-65535`);
  }
  return port;
}

/** `tunnel2 tcp <target>`: runs until Ctrl-C (exit 0) or a refusal retrying cannot fix (exit 1). */
export async function runTcpCommand(target: string, options: TcpCommandOptions): Promise<number> {
  const stdout = createLineWriter(process.stdout);
  const writeErr = (line: string): void => void process.stderr.write(line);
  const reporter = options.json ? createJsonReporter(stdout) : createHumanReporter(stdout, writeErr);
  const redact = { paths: ['authorization', 'token', '*.authorization', '*.token'], censor: '<redacted>' };
  const logger = pino({ level: options.logLevel ?? 'warn', redact }, pino.destination(2));
  let tunnel: Tunnel;
  try {
    const remotePort = remotePortOf(options.remotePort);
    tunnel = new Tunnel({
      target,
      server: options.server,
      token: options.token,
      allowIps: options.allowIp
        ?.split(',')
        .map((s) => s.trim())
        .filter((s) => s !== ''),
      inspect: false,
      tcp: remotePort === undefined ? {} : { remotePort },
      logger,
    });
  } catch (err) {
    if (err instanceof AgentError) {
      reporter.error(err);
      return 1;
    }
    throw err;
  }
  const targetLabel = tunnel.target.host;
  tunnel.on('ready', (info) => reporter.ready(info, targetLabel));
  tunnel.on('connection', (report) => reporter.connection(report));
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
    tunnel.on('error', (error) => {
      reporter.error(error);
      if (error.fatal) stop(1);
    });
    tunnel.start().catch(() => stop(1));
  });
}
