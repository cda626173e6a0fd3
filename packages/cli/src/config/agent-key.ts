import { closeSync, linkSync, mkdirSync, openSync, unlinkSync, writeSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { readUserFile } from '../user-file.js';

// Not an `import`: an ESM import of node:crypto reads every export, and its `webcrypto` getter loads Web
// Crypto, which the agent never uses (bench/README.md, issue #34: the workspace agent's idle RSS).
const { randomBytes } = process.getBuiltinModule('node:crypto');

/**
 * An anonymous agent's identity across runs. The edge reserves a name for its owner for a grace after a
 * session ends; an agent that picked a new key on every run would find its own name "taken" when it is
 * restarted after a crash. The key lives in the user's config directory, readable by the user alone (it
 * is what proves a name is theirs, as a token is).
 */

/** The file's name in `$XDG_CONFIG_HOME/tunnel2/` (else `~/.config/tunnel2/`). */
export const AGENT_KEY_FILE = 'agent-key';

/** 32 random bytes as base64url: 43 characters. A file holding anything else is not one of ours. */
const KEY_PATTERN = /^[A-Za-z0-9_-]{32,128}$/;

export interface AgentKeyOptions {
  /** Where XDG_CONFIG_HOME and HOME are read from (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** One line saying why the key is only for this run (an unreadable or malformed file). */
  warn: (line: string) => void;
}

export interface AgentKey {
  key: string;
  /** The file it came from; undefined for an ephemeral key. */
  path: string | undefined;
}

/** The directory the key lives in: XDG_CONFIG_HOME when set to an absolute path (the XDG spec), else ~/.config. */
export function agentKeyDir(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_CONFIG_HOME;
  const base = xdg !== undefined && isAbsolute(xdg) ? xdg : join(env.HOME || homedir(), '.config');
  return join(base, 'tunnel2');
}

function newKey(): string {
  return randomBytes(32).toString('base64url');
}

function reasonOf(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : String(err);
}

/**
 * Reads the key, creating it on first use. Created atomically: written whole to a private temporary file,
 * then hard-linked to its name, which fails when another agent linked first; that one's key is read
 * instead, so two agents starting together end with the same key. Never throws: a file that cannot be
 * read or written, or does not hold a key, gets one warning and a key for this run only.
 */
export function loadAgentKey(options: AgentKeyOptions): AgentKey {
  const dir = agentKeyDir(options.env);
  const path = join(dir, AGENT_KEY_FILE);
  const ephemeral = (why: string): AgentKey => {
    options.warn(
      `warning: ${why}; using a key for this run only (a restart will not reclaim its names at once)`,
    );
    return { key: newKey(), path: undefined };
  };
  const read = (): AgentKey | undefined => {
    const file = readUserFile(path, 1024);
    if (!file.ok) {
      if (file.code === 'ENOENT') return undefined;
      return ephemeral(`cannot read the agent key ${path} (${file.problem})`);
    }
    const key = file.text.trim();
    if (!KEY_PATTERN.test(key)) {
      return ephemeral(`the agent key ${path} is malformed (delete it to make a new one)`);
    }
    return { key, path };
  };
  const existing = read();
  if (existing !== undefined) return existing;
  const temp = join(dir, `.${AGENT_KEY_FILE}.${process.pid}.${randomBytes(6).toString('hex')}`);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const fd = openSync(temp, 'wx', 0o600);
    try {
      writeSync(fd, `${newKey()}\n`);
    } finally {
      closeSync(fd);
    }
    try {
      linkSync(temp, path);
    } catch (err) {
      if ((err as { code?: unknown }).code !== 'EEXIST') throw err;
    }
  } catch (err) {
    return ephemeral(`cannot create the agent key ${path} (${reasonOf(err)})`);
  } finally {
    try {
      unlinkSync(temp);
    } catch {
      // Never created, or already gone: nothing to clean up.
    }
  }
  return read() ?? ephemeral(`the agent key ${path} vanished as it was created`);
}
