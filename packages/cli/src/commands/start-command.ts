import { DEFAULT_CONFIG_FILE, loadTunnelConfig } from '../config/config-file.js';
import { AgentError, AgentErrorCode } from '../errors.js';
import { resolveServer } from '../session/connect-options.js';
import { createTunnels } from '../session/tunnel-group.js';
import { createLineWriter } from '../terminal/line-writer.js';
import { createHumanReporter, createJsonReporter } from '../terminal/reporter.js';
import { cliAgentKey, type OutputOptions, runTunnelCommand } from './tunnel-command.js';

export interface StartCommandOptions extends OutputOptions {
  config?: string;
  all?: boolean;
  server?: string;
  token?: string;
}

/** Exit status of a config file or command line `start` cannot use (as for a usage error). */
const INVALID_CONFIG_EXIT = 2;

/**
 * `tunnel2 start [names...] | --all`: the tunnels of a config file over one session. Names or --all are
 * required (as `ngrok start`): a file often lists more tunnels than one wants each time, and starting them
 * all by surprise would expose services. Server and token: flag > env > file.
 */
export async function runStartCommand(names: string[], options: StartCommandOptions): Promise<number> {
  const file = options.config ?? DEFAULT_CONFIG_FILE;
  let tunnels: Awaited<ReturnType<typeof loadTunnelConfig>>;
  try {
    tunnels = await loadTunnelConfig(file);
    const defined = tunnels.tunnels.map((tunnel) => tunnel.name);
    if (options.all === true && names.length > 0) {
      throw usage(`name tunnels or use --all, not both (${file} defines ${defined.join(', ')})`);
    }
    if (options.all !== true && names.length === 0) {
      throw usage(`name the tunnels to start, or use --all (${file} defines ${defined.join(', ')})`);
    }
    const unknown = names.filter((name) => !defined.includes(name));
    if (unknown.length > 0) {
      throw usage(`no tunnel named ${unknown.join(', ')} in ${file} (it defines ${defined.join(', ')})`);
    }
    if (names.length > 0) {
      tunnels = { ...tunnels, tunnels: tunnels.tunnels.filter((tunnel) => names.includes(tunnel.name)) };
    }
  } catch (err) {
    if (!(err instanceof AgentError)) throw err;
    process.stderr.write(`tunnel2: ${err.message}\n`);
    if (options.json === true) {
      // As `http --json` reports a bad target: the error event a script reads on stdout.
      const stdout = createLineWriter(process.stdout);
      createJsonReporter(stdout).error(err);
      stdout.flush();
    }
    return INVALID_CONFIG_EXIT;
  }
  const config = tunnels;
  return runTunnelCommand(
    options,
    (logger) => {
      const token = options.token ?? process.env.TUNNEL2_TOKEN ?? config.token;
      return createTunnels({
        // Flag > env > file > default, checked once (the file's was checked with its key path).
        server: resolveServer(options.server, config.server),
        token,
        agentKey: cliAgentKey(token),
        logger,
        configFile: file,
        tunnels: config.tunnels,
      });
    },
    (group, _reporter, output) => {
      const writeErr = (line: string): void => void process.stderr.write(line);
      for (const tunnel of group.tunnels) {
        const label = tunnel.label ?? tunnel.target.host;
        // On a terminal every tunnel is a row of the one header, its lines prefixed by its name.
        const reporter = output.screen
          ? output.screen.tunnel(label, tunnel.target.origin.startsWith('tcp:') ? 'connections' : 'requests')
          : output.json
            ? createJsonReporter(output.stdout, { tunnel: tunnel.label })
            : createHumanReporter(output.stdout, writeErr, { tunnel: tunnel.label });
        const targetLabel = tunnel.target.origin + tunnel.target.basePath;
        tunnel.on('ready', (info) =>
          reporter.ready(info, targetLabel, tunnel.inspectorUrl, tunnel.backendProtocol),
        );
        tunnel.on('replicas', (count) => reporter.replicas?.(count));
        tunnel.on('hint', (hint) => reporter.hint(hint.code, hint.message));
        tunnel.on('request', (report) => reporter.request(report));
        tunnel.on('connection', (report) => reporter.connection(report));
      }
    },
  );
}

function usage(message: string): AgentError {
  return new AgentError(AgentErrorCode.INVALID_CONFIG, message, { fatal: true });
}
