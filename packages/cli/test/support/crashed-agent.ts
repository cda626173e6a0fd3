import { spawnCli } from './processes.js';

export interface CrashedAgentOptions {
  server: string;
  /** The local target (a port): never reached, the agent is gone before any request. */
  target: number;
  subdomain?: string;
  token?: string;
  /** A TCP tunnel (`tunnel2 tcp`), on this public port if given. */
  tcp?: { remotePort?: number };
}

/**
 * An agent that connected and then crashed (the CLI killed with SIGKILL, no GOAWAY): its name or TCP port
 * stays reserved for its owner through the edge's reconnect grace. An agent closed gracefully frees them at
 * once, so a test of the grace needs this. Resolves with what the edge gave it, once the process is gone.
 */
export async function crashedAgent(options: CrashedAgentOptions): Promise<{ name: string; url: string }> {
  const args =
    options.tcp === undefined
      ? ['http', String(options.target), '--no-inspect']
      : ['tcp', String(options.target)];
  if (options.subdomain !== undefined) args.push('--subdomain', options.subdomain);
  if (options.tcp?.remotePort !== undefined) args.push('--remote-port', String(options.tcp.remotePort));
  if (options.token !== undefined) args.push('--token', options.token);
  const agent = spawnCli([...args, '--server', options.server, '--json']);
  try {
    const ready = await agent.waitFor('ready');
    return { name: String(ready.name), url: String(ready.url) };
  } finally {
    agent.kill('SIGKILL');
    await agent.exited;
  }
}
