import { basename, dirname, extname, resolve } from 'node:path';
// A static import: this module is itself loaded only by `tunnel2 start`, so `tunnel2 http` carries no YAML
// parser. (A dynamic import('yaml') broke in the published bundle: esbuild's chunk for that CommonJS
// package exports only a default, and `parse` came out undefined.)
import { LineCounter, parse, YAMLParseError } from 'yaml';
import { AgentError, AgentErrorCode } from '../errors.js';
import { resolveBackendMode } from '../forwarding/http2/backend-mode.js';
import { parseTarget, parseTcpTarget } from '../forwarding/target.js';
import { readCaFile } from '../forwarding/target-tls.js';
import {
  firstInvalidIp,
  isBasicAuth,
  isServerUrl,
  resolveHostHeader,
  SERVER_URL_EXPECTED,
} from '../session/connect-options.js';
import type { NamedTunnelOptions } from '../session/tunnel-group.js';
import { readUserFile } from '../user-file.js';

/** The file `tunnel2 start` reads when no --config is given (docs/config-file.md). */
export const DEFAULT_CONFIG_FILE = 'tunnel2.yml';

/** A config file, checked: the edge and token it names (if any) and its tunnels in file order. */
export interface TunnelConfig {
  server: string | undefined;
  token: string | undefined;
  tunnels: NamedTunnelOptions[];
}

/** The keys each level takes (tunnel2.schema.json lists the same; a test keeps them in step). */
export const TOP_KEYS = ['server', 'token', 'tunnels'];
export const HTTP_KEYS = [
  'proto',
  'target',
  'subdomain',
  'replica',
  'host_header',
  'basic_auth',
  'allow_ip',
  'inspect',
  'insecure',
  'ca',
  'h2c',
  'http1',
];
export const TCP_KEYS = ['proto', 'target', 'remote_port', 'replica', 'allow_ip'];
/** A tunnel's name: it prefixes output lines, so it stays short and plain. */
const NAME = /^[a-z0-9][a-z0-9_-]{0,31}$/i;

/** One line naming the file, the key path and what is allowed (exit status 2 in the CLI). */
function invalid(file: string, path: string, message: string): AgentError {
  return new AgentError(AgentErrorCode.INVALID_CONFIG, `${file}: ${path}: ${message}`, { fatal: true });
}

function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** `tunnels.<name>`, quoted when the name would read as a deeper key path (`tunnels["my.app"]`). */
function tunnelPath(name: string): string {
  return /^[\w-]+$/.test(name) ? `tunnels.${name}` : `tunnels[${JSON.stringify(name)}]`;
}

/** Why a file does not parse, with where (YAML: line and column; Node's JSON errors say where themselves). */
function syntaxProblem(err: unknown, lines: LineCounter): string {
  const why = err instanceof Error ? (err.message.split('\n')[0] ?? '') : String(err);
  if (!(err instanceof YAMLParseError)) return `: ${why}`;
  const { line, col } = lines.linePos(err.pos[0]);
  return ` at line ${line}, column ${col}: ${why}`;
}

/**
 * Reads and checks `path` (`.json` as JSON, anything else as YAML), relative to the working directory.
 * Messages name the file as given (a missing one) or by its base name (a mistake in it). Only a regular
 * file of at most 1 MiB is read (readUserFile): a config file is kilobytes, and `--config /dev/zero` or a
 * FIFO must end in an error, not in a read that never ends.
 */
export async function loadTunnelConfig(path: string): Promise<TunnelConfig> {
  const file = basename(path);
  const read = readUserFile(resolve(path));
  if (!read.ok) {
    const why =
      read.code === 'ENOENT'
        ? 'not found (create it, or pass --config <file>)'
        : read.code === 'NOT_REGULAR' || read.code === 'TOO_LARGE'
          ? read.problem
          : `cannot be read (${read.code})`;
    throw new AgentError(AgentErrorCode.INVALID_CONFIG, `${path}: ${why}`, {
      cause: read.cause,
      fatal: true,
    });
  }
  const { text } = read;
  const json = extname(path).toLowerCase() === '.json';
  let data: unknown;
  const lines = new LineCounter();
  try {
    data = json ? JSON.parse(text) : parse(text, { prettyErrors: false, lineCounter: lines });
  } catch (err) {
    throw new AgentError(
      AgentErrorCode.INVALID_CONFIG,
      `${file}: not valid ${json ? 'JSON' : 'YAML'}${syntaxProblem(err, lines)}`,
      { cause: err, fatal: true },
    );
  }
  // A YAML file of nothing but comments and blank lines parses to null.
  if (data === null || data === undefined) {
    throw new AgentError(
      AgentErrorCode.INVALID_CONFIG,
      `${file}: the file is empty: list tunnels under \`tunnels:\``,
      { fatal: true },
    );
  }
  return checkTunnelConfig(file, data, dirname(resolve(path)));
}

/**
 * Checks a parsed config file; every mistake is one AgentError naming `file` and the key. Paths in it (a
 * tunnel's `ca`) are relative to `baseDir`, the file's directory.
 */
export function checkTunnelConfig(file: string, data: unknown, baseDir = process.cwd()): TunnelConfig {
  const top = object(file, '(top level)', data);
  unknownKeys(file, '', top, TOP_KEYS);
  const server = optionalString(file, 'server', top.server);
  if (server !== undefined && !isServerUrl(server)) {
    throw invalid(file, 'server', `${SERVER_URL_EXPECTED}, got ${shown(server)}`);
  }
  const token = optionalString(file, 'token', top.token);
  if (top.tunnels === undefined) throw invalid(file, 'tunnels', 'missing: list at least one tunnel');
  const entries = Object.entries(object(file, 'tunnels', top.tunnels));
  if (entries.length === 0) throw invalid(file, 'tunnels', 'empty: list at least one tunnel');
  const subdomains = new Map<string, string>();
  const tunnels = entries.map(([name, value]) => {
    const path = tunnelPath(name);
    if (!NAME.test(name)) {
      throw invalid(file, path, 'a tunnel name is letters, digits, - and _ (at most 32 characters)');
    }
    const tunnel = checkTunnel(file, baseDir, path, name, object(file, path, value));
    if (tunnel.subdomain !== undefined) {
      const other = subdomains.get(tunnel.subdomain.toLowerCase());
      if (other !== undefined)
        throw invalid(file, `${path}.subdomain`, `"${tunnel.subdomain}" is also ${tunnelPath(other)}'s`);
      subdomains.set(tunnel.subdomain.toLowerCase(), name);
    }
    return tunnel;
  });
  return { server, token, tunnels };
}

function checkTunnel(
  file: string,
  baseDir: string,
  path: string,
  name: string,
  fields: Record<string, unknown>,
): NamedTunnelOptions {
  const proto = fields.proto ?? 'http';
  if (proto !== 'http' && proto !== 'tcp')
    throw invalid(file, `${path}.proto`, `expected http or tcp, got ${shown(proto)}`);
  unknownKeys(file, `${path}.`, fields, proto === 'tcp' ? TCP_KEYS : HTTP_KEYS);
  if (fields.target === undefined) throw invalid(file, `${path}.target`, 'missing: a port, host:port or URL');
  const target = checkTarget(file, `${path}.target`, fields.target, proto);
  const allowIps =
    fields.allow_ip === undefined ? undefined : stringList(file, `${path}.allow_ip`, fields.allow_ip);
  if (proto === 'tcp') {
    const remotePort = fields.remote_port;
    if (
      remotePort !== undefined &&
      !(Number.isInteger(remotePort) && (remotePort as number) >= 1 && (remotePort as number) <= 65535)
    ) {
      throw invalid(file, `${path}.remote_port`, `expected a port number 1-65535, got ${shown(remotePort)}`);
    }
    const replica = fields.replica ?? false;
    if (typeof replica !== 'boolean')
      throw invalid(file, `${path}.replica`, `expected true or false, got ${shown(replica)}`);
    if (replica && remotePort === undefined)
      throw invalid(file, `${path}.replica`, 'TCP replicas share one public port: set remote_port too');
    return {
      name,
      target,
      allowIps,
      tcp: { remotePort: remotePort as number | undefined },
      ...(replica ? { replica } : {}),
    };
  }
  const subdomain = optionalString(file, `${path}.subdomain`, fields.subdomain);
  if (subdomain !== undefined && !/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i.test(subdomain)) {
    throw invalid(
      file,
      `${path}.subdomain`,
      `expected a DNS label (a-z, 0-9, inner hyphens, at most 63), got ${shown(subdomain)}`,
    );
  }
  const hostHeader = optionalString(file, `${path}.host_header`, fields.host_header);
  if (hostHeader !== undefined) {
    reworded(
      file,
      `${path}.host_header`,
      `expected rewrite, preserve or a host value, got ${shown(hostHeader)}`,
      () => resolveHostHeader(hostHeader),
    );
  }
  const basicAuth = optionalString(file, `${path}.basic_auth`, fields.basic_auth);
  if (basicAuth !== undefined && !isBasicAuth(basicAuth)) {
    throw invalid(file, `${path}.basic_auth`, 'expected user:password (both non-empty)');
  }
  const replica = fields.replica ?? false;
  if (typeof replica !== 'boolean')
    throw invalid(file, `${path}.replica`, `expected true or false, got ${shown(replica)}`);
  if (replica && subdomain === undefined)
    throw invalid(file, `${path}.replica`, 'a replica joins a name: set subdomain too');
  const inspect = fields.inspect ?? false;
  if (typeof inspect !== 'boolean')
    throw invalid(file, `${path}.inspect`, `expected true or false, got ${shown(inspect)}`);
  const tls = checkTargetTls(file, baseDir, path, target, fields);
  const protocol = checkBackendProtocol(file, path, target, fields);
  return {
    name,
    target,
    subdomain,
    ...(replica ? { replica } : {}),
    hostHeader,
    basicAuth,
    allowIps,
    inspect: inspect ? {} : false,
    ...tls,
    ...protocol,
  };
}

/** `h2c` and `http1` (as --h2c and --http1): booleans, and not a combination the agent would refuse. */
function checkBackendProtocol(
  file: string,
  path: string,
  target: string,
  fields: Record<string, unknown>,
): { h2c?: boolean; http1?: boolean } {
  const out: { h2c?: boolean; http1?: boolean } = {};
  for (const key of ['h2c', 'http1'] as const) {
    const value = fields[key];
    if (value === undefined) continue;
    if (typeof value !== 'boolean')
      throw invalid(file, `${path}.${key}`, `expected true or false, got ${shown(value)}`);
    out[key] = value;
  }
  try {
    resolveBackendMode(parseTarget(target).origin, out);
  } catch (err) {
    if (!(err instanceof AgentError)) throw err;
    // The flag's wording, with the file's keys in place of the flags.
    const why = err.message.replace(/--h2c/g, 'h2c').replace(/--http1/g, 'http1');
    throw invalid(file, `${path}.h2c`, why);
  }
  return out;
}

/**
 * `insecure` and `ca` (a PEM file, relative to the config file) for an https:// target. The CA is read
 * here, once, so a wrong path is reported with its key before anything connects.
 */
function checkTargetTls(
  file: string,
  baseDir: string,
  path: string,
  target: string,
  fields: Record<string, unknown>,
): { insecure?: boolean; ca?: string } {
  const { insecure, ca } = fields;
  if (insecure === undefined && ca === undefined) return {};
  if (!/^https:\/\//i.test(target)) {
    const key = insecure === undefined ? 'ca' : 'insecure';
    throw invalid(
      file,
      `${path}.${key}`,
      `applies to https:// targets only (the target is ${shown(target)})`,
    );
  }
  if (insecure !== undefined && typeof insecure !== 'boolean')
    throw invalid(file, `${path}.insecure`, `expected true or false, got ${shown(insecure)}`);
  const caFile = optionalString(file, `${path}.ca`, ca);
  let pem: string | undefined;
  if (caFile !== undefined) {
    try {
      pem = readCaFile(resolve(baseDir, caFile));
    } catch (err) {
      // readCaFile words its error for the --ca flag: keep its reason, name the key instead.
      const why = err instanceof AgentError ? err.message.replace(/^--ca [^:]*: /, '') : String(err);
      throw invalid(file, `${path}.ca`, `${shown(caFile)}: ${why}`);
    }
  }
  return {
    ...(insecure === undefined ? {} : { insecure }),
    ...(pem === undefined ? {} : { ca: pem }),
  };
}

/**
 * Runs the command line's own check of a value (it throws an AgentError worded for a flag) and words a
 * refusal for the file instead: its key path and `message`.
 */
function reworded<T>(file: string, path: string, message: string, check: () => T): T {
  try {
    return check();
  } catch (err) {
    if (!(err instanceof AgentError)) throw err;
    throw invalid(file, path, message);
  }
}

/** A port (3000 or "3000"), host:port, or (HTTP) a URL: what `tunnel2 http`/`tcp` take, by their parsers. */
function checkTarget(file: string, path: string, value: unknown, proto: 'http' | 'tcp'): string {
  const forms = proto === 'tcp' ? 'a port or host:port' : 'a port, host:port or URL';
  const message = `expected ${forms}, got ${shown(value)}`;
  if (typeof value !== 'string' && typeof value !== 'number') throw invalid(file, path, message);
  const text = String(value);
  reworded(file, path, message, () => (proto === 'tcp' ? parseTcpTarget(text) : parseTarget(text)));
  return text;
}

function object(file: string, path: string, value: unknown): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalid(file, path, `expected a mapping of keys, got ${shown(value)}`);
  }
  return value as Record<string, unknown>;
}

function unknownKeys(file: string, prefix: string, fields: Record<string, unknown>, allowed: string[]): void {
  for (const key of Object.keys(fields)) {
    if (!allowed.includes(key))
      throw invalid(file, `${prefix}${key}`, `unknown key (allowed here: ${allowed.join(', ')})`);
  }
}

function optionalString(file: string, path: string, value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || value === '')
    throw invalid(file, path, `expected a non-empty string, got ${shown(value)}`);
  return value;
}

function stringList(file: string, path: string, value: unknown): string[] {
  const list = Array.isArray(value) ? value : [value];
  if (!list.every((item): item is string => typeof item === 'string' && item !== '')) {
    throw invalid(file, path, `expected a list of IP addresses or CIDR blocks, got ${shown(value)}`);
  }
  const bad = firstInvalidIp(list);
  if (bad !== undefined) throw invalid(file, path, `${shown(bad)} is not an IP address or CIDR block`);
  return list;
}
