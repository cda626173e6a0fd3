import { RegistryError, RegistryErrorCode } from './errors.js';

/*
 * The registry's Redis address, one string an operator can put in a flag or a variable:
 *   redis://[user:password@]host:port[/db]                   one Redis (or a proxy in front of a cluster)
 *   rediss://...                                             the same over TLS
 *   redis+cluster://[user:password@]host:port[,host:port]... a Redis Cluster, found from these seed nodes
 *   rediss+cluster://...                                     the same over TLS
 * A cluster URL lists seeds only: the client learns every node from CLUSTER SLOTS. It takes no database
 * number (a cluster has only database 0). WHATWG URL cannot parse a comma-separated host list, so the seed
 * list is split here and each seed parsed on its own; the credentials are percent-decoded as in redis://.
 * No ioredis here: the edge validates the setting with this from the main entry without loading a client.
 */

export interface RedisSeed {
  host: string;
  port: number;
}

export interface RedisAddress {
  cluster: boolean;
  tls: boolean;
  /** One entry for standalone; the seed nodes for a cluster. */
  seeds: RedisSeed[];
  username: string | undefined;
  password: string | undefined;
  /** Standalone only; 0 unless the URL has a path. */
  db: number;
}

const DEFAULT_PORT = 6379;
/** Seeds beyond this are a mistake, not a cluster: a handful of seeds finds every node. */
const MAX_SEEDS = 64;
const SCHEME = /^(rediss?)(\+cluster)?:\/\/([^/?#]*)(\/[^?#]*)?$/i;

function invalid(message: string): RegistryError {
  return new RegistryError(RegistryErrorCode.INVALID_ARGUMENT, message);
}

function parseSeed(text: string, url: string): RedisSeed {
  const candidate = `redis://${text}`;
  if (text === '' || /[@,]/.test(text) || !URL.canParse(candidate)) {
    throw invalid(`bad host:port "${text}" in the Redis URL ${redactRedisUrl(url)}`);
  }
  const parsed = new URL(candidate);
  if (parsed.hostname === '' || parsed.pathname !== '') {
    throw invalid(`bad host:port "${text}" in the Redis URL ${redactRedisUrl(url)}`);
  }
  // IPv6 literals keep their brackets in URL.hostname; clients want the bare address.
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  return { host, port: parsed.port === '' ? DEFAULT_PORT : Number(parsed.port) };
}

/** Parses a registry URL (see above); throws INVALID_ARGUMENT naming what is wrong, password redacted. */
export function parseRedisUrl(url: string): RedisAddress {
  const match = typeof url === 'string' ? SCHEME.exec(url) : null;
  if (match === null) {
    throw invalid('url must be a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL');
  }
  const [, scheme = '', clusterPart, authority = '', path = ''] = match;
  const cluster = clusterPart !== undefined;
  const at = authority.lastIndexOf('@');
  const hosts = at === -1 ? authority : authority.slice(at + 1);
  let username: string | undefined;
  let password: string | undefined;
  if (at !== -1) {
    const candidate = `redis://${authority.slice(0, at)}@x`;
    if (!URL.canParse(candidate)) throw invalid(`bad credentials in the Redis URL ${redactRedisUrl(url)}`);
    const credentials = new URL(candidate);
    username = credentials.username === '' ? undefined : decodeURIComponent(credentials.username);
    password = credentials.password === '' ? undefined : decodeURIComponent(credentials.password);
  }
  const seedTexts = cluster ? hosts.split(',') : [hosts];
  if (seedTexts.length > MAX_SEEDS) throw invalid(`a Redis Cluster URL takes at most ${MAX_SEEDS} seeds`);
  const seeds = seedTexts.map((text) => parseSeed(text, url));
  let db = 0;
  if (path !== '' && path !== '/') {
    if (cluster) throw invalid('a Redis Cluster URL takes no database number (a cluster has only db 0)');
    db = Number(path.slice(1));
    if (!/^\/\d{1,5}$/.test(path) || !Number.isSafeInteger(db)) {
      throw invalid(`bad database number in the Redis URL ${redactRedisUrl(url)}`);
    }
  }
  return { cluster, tls: scheme.toLowerCase() === 'rediss', seeds, username, password, db };
}

/** True for a URL parseRedisUrl accepts. */
export function isRedisUrl(url: string): boolean {
  try {
    parseRedisUrl(url);
    return true;
  } catch {
    return false;
  }
}

/** The URL as logs and errors may show it: the password replaced, even in a URL that does not parse. */
export function redactRedisUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*:)[^@/]*@/i, '$1redacted@');
}
