import { AgentError, AgentErrorCode } from '../errors.js';
import { readCaFile } from '../forwarding/target-tls.js';
import type { InspectOptions } from '../session/connect-options.js';
import { Tunnel } from '../session/tunnel.js';
import { allowIpList, cliAgentKey, runTunnelCommand } from './tunnel-command.js';

export interface HttpCommandOptions {
  server?: string;
  subdomain?: string;
  /** `--replica`: join the subdomain beside the owner's other agents (needs --subdomain). */
  replica?: boolean;
  token?: string;
  hostHeader?: string;
  json?: boolean;
  logLevel?: string;
  tty?: boolean;
  color?: boolean;
  basicAuth?: string;
  allowIp?: string;
  /** `--inspect <host:port>` (a string), `--no-inspect` (false); default true: on, at 127.0.0.1:4040.. */
  inspect?: string | boolean;
  inspectBodyLimit?: string;
  inspectBudget?: string;
  /** `--insecure`: an https:// target's certificate is not checked. */
  insecure?: boolean;
  /** `--ca <file>`: a PEM CA trusted for an https:// target, read once here. */
  ca?: string;
  /** `--h2c`: the backend speaks HTTP/2 with prior knowledge. */
  h2c?: boolean;
  /** `--http1`: an https:// target is spoken to over HTTP/1.1 only. */
  http1?: boolean;
}

function byteCount(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const match = /^(\d+)\s*([kmg]i?b?)?$/i.exec(value.trim());
  if (match === null) {
    throw new AgentError(
      AgentErrorCode.INVALID_OPTION,
      `${flag} "${value}": a number of bytes (e.g. 1048576, 512k, 64m)`,
    );
  }
  const unit = (match[2] ?? '').toLowerCase()[0];
  const scale = unit === 'k' ? 1024 : unit === 'm' ? 1024 ** 2 : unit === 'g' ? 1024 ** 3 : 1;
  return Number(match[1]) * scale;
}

/** `--inspect` / `--no-inspect` / `--inspect-*` into connect()'s `inspect` option. */
export function resolveInspect(options: HttpCommandOptions): false | InspectOptions {
  if (options.inspect === false) return false;
  const inspect: InspectOptions = {};
  if (typeof options.inspect === 'string') {
    const match = /^(?:(\[[0-9a-f:.]+\]|[^:[\]]*):)?(\d{1,5})$/i.exec(options.inspect.trim());
    const port = Number(match?.[2]);
    if (match === null || port > 65535) {
      throw new AgentError(
        AgentErrorCode.INVALID_OPTION,
        `--inspect "${options.inspect}": expected host:port or a port (127.0.0.1:4040, 4041)`,
      );
    }
    if (match[1]) inspect.host = match[1].replace(/^\[|\]$/g, '');
    inspect.port = port;
  }
  const bodyLimit = byteCount('--inspect-body-limit', options.inspectBodyLimit);
  if (bodyLimit !== undefined) inspect.bodyLimit = bodyLimit;
  const budget = byteCount('--inspect-budget', options.inspectBudget);
  if (budget !== undefined) inspect.budget = budget;
  return inspect;
}

/** `tunnel2 http <target>`: runs until Ctrl-C (exit 0) or a refusal retrying cannot fix (exit 1). */
export function runHttpCommand(target: string, options: HttpCommandOptions): Promise<number> {
  return runTunnelCommand(
    options,
    (logger) =>
      new Tunnel({
        target,
        server: options.server,
        subdomain: options.subdomain,
        replica: options.replica,
        token: options.token,
        agentKey: cliAgentKey(options.token ?? process.env.TUNNEL2_TOKEN),
        hostHeader: options.hostHeader,
        basicAuth: options.basicAuth,
        allowIps: allowIpList(options.allowIp),
        inspect: resolveInspect(options),
        insecure: options.insecure,
        ca: options.ca === undefined ? undefined : readCaFile(options.ca),
        h2c: options.h2c,
        http1: options.http1,
        logger,
      }),
    (tunnel, reporter) => {
      const targetLabel = tunnel.target.origin + tunnel.target.basePath;
      tunnel.on('ready', (info) =>
        reporter.ready(info, targetLabel, tunnel.inspectorUrl, tunnel.backendProtocol),
      );
      tunnel.on('replicas', (count) => reporter.replicas?.(count));
      tunnel.on('hint', (hint) => reporter.hint(hint.code, hint.message));
      tunnel.on('request', (report) => reporter.request(report));
    },
    (err, reporter) => {
      // An inspector that cannot start fails before any session.
      if (err instanceof AgentError && err.code === AgentErrorCode.INSPECTOR_FAILED) reporter.error(err);
    },
  );
}
