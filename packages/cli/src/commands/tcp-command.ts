import { AgentError, AgentErrorCode } from '../errors.js';
import { Tunnel } from '../session/tunnel.js';
import { allowIpList, cliAgentKey, runTunnelCommand } from './tunnel-command.js';

export interface TcpCommandOptions {
  server?: string;
  token?: string;
  json?: boolean;
  logLevel?: string;
  tty?: boolean;
  color?: boolean;
  remotePort?: string;
  allowIp?: string;
  /** `--replica`: share the public port with the owner's other agents (needs --remote-port). */
  replica?: boolean;
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
export function runTcpCommand(target: string, options: TcpCommandOptions): Promise<number> {
  return runTunnelCommand(
    options,
    (logger) => {
      const remotePort = remotePortOf(options.remotePort);
      return new Tunnel({
        target,
        server: options.server,
        token: options.token,
        agentKey: cliAgentKey(options.token ?? process.env.TUNNEL2_TOKEN),
        allowIps: allowIpList(options.allowIp),
        inspect: false,
        tcp: remotePort === undefined ? {} : { remotePort },
        replica: options.replica,
        logger,
      });
    },
    (tunnel, reporter) => {
      tunnel.on('ready', (info) => reporter.ready(info, tunnel.target.host));
      tunnel.on('replicas', (count) => reporter.replicas?.(count));
      tunnel.on('connection', (report) => reporter.connection(report));
    },
  );
}
