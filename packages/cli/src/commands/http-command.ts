import { pino } from 'pino';
import { AgentError } from '../errors.js';
import { createLineWriter } from '../line-writer.js';
import { createHumanReporter, createJsonReporter } from '../reporter.js';
import { onShutdownSignal } from '../shutdown-signal.js';
import { Tunnel } from '../tunnel.js';

export interface HttpCommandOptions {
  server?: string;
  subdomain?: string;
  token?: string;
  hostHeader?: string;
  json?: boolean;
  logLevel?: string;
  basicAuth?: string;
  allowIp?: string;
}

/** `tunnel2 http <target>`: runs until Ctrl-C (exit 0) or a refusal retrying cannot fix (exit 1). */
export async function runHttpCommand(target: string, options: HttpCommandOptions): Promise<number> {
  const stdout = createLineWriter(process.stdout);
  const writeErr = (line: string): void => void process.stderr.write(line);
  const reporter = options.json ? createJsonReporter(stdout) : createHumanReporter(stdout, writeErr);
  // Tokens and credentials never reach the log, whatever a debug line carries.
  const redact = {
    paths: ['authorization', 'token', '*.authorization', '*.token', 'headers.authorization'],
    censor: '<redacted>',
  };
  const logger = pino({ level: options.logLevel ?? 'warn', redact }, pino.destination(2));
  let tunnel: Tunnel;
  try {
    tunnel = new Tunnel({
      target,
      server: options.server,
      subdomain: options.subdomain,
      token: options.token,
      hostHeader: options.hostHeader,
      basicAuth: options.basicAuth,
      allowIps: options.allowIp
        ?.split(',')
        .map((s) => s.trim())
        .filter((s) => s !== ''),
      logger,
    });
  } catch (err) {
    if (err instanceof AgentError) {
      reporter.error(err);
      return 1;
    }
    throw err;
  }
  const targetLabel = tunnel.target.origin + tunnel.target.basePath;
  tunnel.on('ready', (info) => reporter.ready(info, targetLabel));
  tunnel.on('request', (report) => reporter.request(report));
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
      // A refusal retrying cannot fix (bad token, name taken over): stop with a failure status.
      if (error.fatal) stop(1);
    });
    tunnel.start().catch(() => stop(1));
  });
}
