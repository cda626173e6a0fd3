import { readdirSync, readFileSync } from 'node:fs';

/**
 * The public port's connection cap derived from the open-file limit, as HAProxy derives `maxconn` from
 * `ulimit -n`. At the limit itself libuv accepts and closes every pending connection (its EMFILE trick)
 * and Node never hears of it: clients see a reset and the operator sees nothing. Below it Node drops the
 * connection itself and says so ('drop'), and the edge keeps descriptors for its own work: Redis, node
 * links, TCP tunnels, its log. Undefined where the limit cannot be read (not Linux) or is unlimited.
 */
export function connectionCapFromOpenFiles(): number | undefined {
  const limit = openFileLimit();
  const open = openFileCount();
  if (limit === undefined || open === undefined) return undefined;
  return Math.max(1, limit - open - reservedFiles(limit));
}

/** Descriptors kept back from public connections: 5 % of the limit, at least 8. */
export function reservedFiles(limit: number): number {
  return Math.max(8, Math.ceil(limit * 0.05));
}

/** The soft RLIMIT_NOFILE of this process (Node has no getrlimit; Linux shows it in /proc). */
function openFileLimit(): number | undefined {
  let text: string;
  try {
    text = readFileSync('/proc/self/limits', 'utf8');
  } catch {
    return undefined;
  }
  const soft = /^Max open files\s+(\d+)/m.exec(text)?.[1];
  return soft === undefined ? undefined : Number(soft);
}

function openFileCount(): number | undefined {
  try {
    return readdirSync('/proc/self/fd').length;
  } catch {
    return undefined;
  }
}
