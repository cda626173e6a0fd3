/** Where one `tunnel2 server` cluster node runs: its registry, its id, its public port, the shared secret. */
export interface ClusterNodeArgsOptions {
  redisUrl: string;
  id: string;
  port: number;
  secret: string;
  /** A loopback address of its own (127.0.0.2, …), so that nodes can each listen on the same TCP range. */
  host?: string;
}

/**
 * The `tunnel2 server` flags that make a process one node of a cluster on loopback: a fixed port (a restarted
 * node comes back where the load balancer and the other nodes expect it) that is also its node URL.
 */
export function clusterNodeArgs(options: ClusterNodeArgsOptions): string[] {
  const host = options.host ?? '127.0.0.1';
  return [
    ...(options.host === undefined ? [] : ['--host', options.host]),
    '--port',
    String(options.port),
    '--registry',
    options.redisUrl,
    '--node-id',
    options.id,
    '--node-url',
    `http://${host}:${options.port}`,
    '--cluster-secret',
    options.secret,
  ];
}
