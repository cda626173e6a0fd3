/** Where one `tunnel2 server` cluster node runs: its registry, its id, its public port, the shared secret. */
export interface ClusterNodeArgsOptions {
  redisUrl: string;
  id: string;
  port: number;
  secret: string;
}

/**
 * The `tunnel2 server` flags that make a process one node of a cluster on loopback: a fixed port (a restarted
 * node comes back where the load balancer and the other nodes expect it) that is also its node URL.
 */
export function clusterNodeArgs(options: ClusterNodeArgsOptions): string[] {
  return [
    '--port',
    String(options.port),
    '--registry',
    options.redisUrl,
    '--node-id',
    options.id,
    '--node-url',
    `http://127.0.0.1:${options.port}`,
    '--cluster-secret',
    options.secret,
  ];
}
