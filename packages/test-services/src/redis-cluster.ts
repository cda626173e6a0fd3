import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ServiceError, ServiceErrorCode } from './errors.js';
import { findBinary } from './native-process.js';
import { type RedisServer, startRedisServer } from './redis-server.js';

/**
 * A real, throwaway Redis Cluster: three masters, no replicas, loopback, free ports, no persistence.
 * `redis-cli --cluster create` (Debian's redis-tools, a dependency of the redis-server package) assigns the
 * 16384 slots; the cluster is handed over once every node reports `cluster_state:ok`.
 */
export interface RedisCluster {
  readonly nodes: readonly RedisServer[];
  /** `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`. */
  readonly url: string;
  /** Runs redis-cli against one node (e.g. `CLUSTER KEYSLOT k`, `DBSIZE`); its trimmed output. */
  cli(port: number, ...args: string[]): Promise<string>;
  stop(): Promise<void>;
}

const run = promisify(execFile);
const REDIS_CLI_CANDIDATES = ['/usr/bin/redis-cli', '/usr/local/bin/redis-cli'];
const CLI_TIMEOUT_MS = 30_000;
/** Gossip settles in well under a second on loopback; the bound is for a loaded machine. */
const STATE_OK_ATTEMPTS = 200;
const STATE_OK_INTERVAL_MS = 50;

export async function startRedisCluster(): Promise<RedisCluster> {
  const cliBinary = findBinary(REDIS_CLI_CANDIDATES, 'redis-tools');
  const dir = await mkdtemp(join(tmpdir(), 'tunnel2-redis-cluster-'));
  const nodes: RedisServer[] = [];
  const cli = async (port: number, ...args: string[]): Promise<string> => {
    const { stdout } = await run(cliBinary, ['-h', '127.0.0.1', '-p', String(port), ...args], {
      timeout: CLI_TIMEOUT_MS,
    });
    return stdout.trim();
  };
  const stop = async (): Promise<void> => {
    await Promise.all(nodes.map((node) => node.stop()));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < 3; i++) {
      nodes.push(
        await startRedisServer({
          extraArgs: (port) => [
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            join(dir, `nodes-${port}.conf`),
            '--dir',
            dir,
          ],
        }),
      );
    }
    const seeds = nodes.map((node) => `127.0.0.1:${node.port}`);
    await run(cliBinary, ['--cluster', 'create', ...seeds, '--cluster-replicas', '0', '--cluster-yes'], {
      timeout: CLI_TIMEOUT_MS,
    });
    for (const node of nodes) {
      let ok = false;
      for (let attempt = 0; attempt < STATE_OK_ATTEMPTS && !ok; attempt++) {
        ok = (await cli(node.port, 'CLUSTER', 'INFO')).includes('cluster_state:ok');
        if (!ok) await new Promise((resolve) => setTimeout(resolve, STATE_OK_INTERVAL_MS));
      }
      if (!ok) {
        throw new ServiceError(
          ServiceErrorCode.START,
          `Redis Cluster node ${node.port} never reached cluster_state:ok`,
        );
      }
    }
  } catch (err) {
    await stop();
    throw err;
  }
  const url = `redis+cluster://${nodes.map((node) => `127.0.0.1:${node.port}`).join(',')}`;
  return { nodes, url, cli, stop };
}
