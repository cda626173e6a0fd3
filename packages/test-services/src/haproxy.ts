import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './free-port.js';
import { findBinary, type NativeProcess, spawnListening, stopProcess } from './native-process.js';

/*
 * Debian's HAProxy round-robin in front of `tunnel2 server` nodes, for both public traffic and agent
 * WebSockets, as an operator runs one. Its config lives in a temp dir that stop() removes.
 */

/** One node behind the load balancer. */
export interface LbNode {
  port: number;
  /** The node's listen address (its health check goes there too); default 127.0.0.1. */
  host?: string;
  /** The node's operations port: with `checks.http`, HAProxy asks its /readyz. */
  adminPort?: number;
}

export interface LbChecks {
  /** GET /readyz on each node's adminPort; otherwise a TCP connect to its public port. */
  http: boolean;
  /** Check interval, and how many failed/passed checks take a node out/back in. */
  interMs: number;
  fall: number;
  rise: number;
}

export interface LbOptions {
  /**
   * Health checks, with a request that could not reach a node (refused, or closed without an answer) retried
   * on another one. Absent: plain round robin, no retries (a registry outage, every /readyz 503, would
   * otherwise leave HAProxy without a server).
   */
  checks?: LbChecks;
  /** `x-lb-server: n0|n1|...` on every response: which node answered (a test waits for a restarted one). */
  serverHeader?: boolean;
  maxconn?: number;
}

const HAPROXY_CANDIDATES = ['/usr/sbin/haproxy', '/usr/bin/haproxy', '/usr/local/sbin/haproxy'];

function serverLine(node: LbNode, i: number, checks: LbChecks | undefined): string {
  const server = `  server n${i} ${node.host ?? '127.0.0.1'}:${node.port}`;
  if (checks === undefined) return server;
  const where = checks.http ? ` port ${node.adminPort ?? node.port}` : '';
  return `${server} check${where} inter ${checks.interMs} fall ${checks.fall} rise ${checks.rise}`;
}

/** `mode http` round-robin for everything; `timeout tunnel` keeps agent WebSockets and SSE open. */
export function haproxyConfig(lbPort: number, nodes: readonly LbNode[], options: LbOptions = {}): string {
  const { checks } = options;
  const retries =
    checks === undefined
      ? []
      : [
          ...(checks.http ? ['  option httpchk GET /readyz'] : []),
          '  option redispatch 1',
          '  retries 3',
          // A stopped node refuses connections; a killed one closes them unanswered: neither loses a request
          // that had not reached a backend yet.
          '  retry-on conn-failure empty-response',
          // A check slowed by a busy machine is not a dead node (a stopped one refuses at once).
          '  timeout check 2s',
        ];
  return [
    'global',
    `  maxconn ${options.maxconn ?? 2000}`,
    'defaults',
    '  mode http',
    '  timeout connect 5s',
    '  timeout client 60s',
    '  timeout server 60s',
    '  timeout tunnel 1h',
    '  option forwardfor',
    'frontend public',
    `  bind 127.0.0.1:${lbPort}`,
    '  default_backend edges',
    'backend edges',
    '  balance roundrobin',
    ...retries,
    ...(options.serverHeader === true ? ['  http-response set-header x-lb-server %s'] : []),
    ...nodes.map((node, i) => serverLine(node, i, checks)),
    '',
  ].join('\n');
}

export interface Haproxy {
  readonly port: number;
  readonly url: string;
  /** Stops HAProxy, waits for its exit and removes its config; idempotent. */
  stop(): Promise<void>;
  /** SIGKILL without waiting: for an exit handler that cannot wait. */
  kill(): void;
}

/** HAProxy on a free port in front of `nodes`; resolves once it accepts connections. */
export async function startHaproxy(nodes: readonly LbNode[], options: LbOptions = {}): Promise<Haproxy> {
  const bin = findBinary(HAPROXY_CANDIDATES, 'haproxy');
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'tunnel2-haproxy-'));
  let proc: NativeProcess;
  try {
    const configPath = join(dir, 'haproxy.cfg');
    await writeFile(configPath, haproxyConfig(port, nodes, options));
    proc = await spawnListening('haproxy', bin, ['-db', '-f', configPath], port);
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    async stop() {
      await stopProcess(proc);
      await rm(dir, { recursive: true, force: true });
    },
    kill() {
      proc.child.kill('SIGKILL');
    },
  };
}
