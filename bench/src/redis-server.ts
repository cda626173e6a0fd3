import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { Socket } from 'node:net';
import { BenchError, BenchErrorCode } from './errors.js';
import { findBinary, freePort, spawnListening, stopNative } from './native-service.js';

/**
 * A real `redis-server` (the Debian package) on a free loopback port, no persistence, for the benches that
 * run the edge in cluster mode. `info()` reads INFO over a plain socket: the bench needs nothing else from
 * Redis, so it does not carry a client library for it.
 */
export interface RedisServer {
  readonly url: string;
  readonly pid: number;
  readonly process: ChildProcess;
  /** Every `key:value` line of `INFO all` (memory, stats, commandstats, ...). */
  info(): Promise<Map<string, string>>;
  stop(): Promise<void>;
}

const REDIS_CANDIDATES = ['/usr/bin/redis-server', '/usr/local/bin/redis-server'];
/** INFO all is a few KB; anything far larger is not an INFO reply. */
const MAX_INFO_BYTES = 1024 * 1024;
const INFO_TIMEOUT_MS = 5_000;

function infoError(why: string): BenchError {
  return new BenchError(BenchErrorCode.STACK, `redis-server INFO failed: ${why}`);
}

/** Parses one RESP bulk-string reply (`$<len>\r\n<bytes>\r\n`) once it is complete; undefined until then. */
function bulkReply(buffer: Buffer): string | undefined {
  const lineEnd = buffer.indexOf('\r\n');
  if (lineEnd < 0) return undefined;
  const head = buffer.subarray(0, lineEnd).toString('latin1');
  if (head.startsWith('-')) throw infoError(head.slice(1));
  const length = head.startsWith('$') ? Number(head.slice(1)) : Number.NaN;
  if (!Number.isSafeInteger(length) || length < 0 || length > MAX_INFO_BYTES) {
    throw infoError(`unexpected reply ${JSON.stringify(head.slice(0, 40))}`);
  }
  const start = lineEnd + 2;
  if (buffer.length < start + length) return undefined;
  return buffer.subarray(start, start + length).toString('utf8');
}

export async function readRedisInfo(port: number): Promise<Map<string, string>> {
  const socket = new Socket();
  socket.setTimeout(INFO_TIMEOUT_MS, () => socket.destroy(infoError('no answer in time')));
  try {
    socket.connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write('INFO all\r\n');
    let received = Buffer.alloc(0);
    let text: string | undefined;
    for await (const chunk of socket) {
      received = Buffer.concat([received, chunk as Buffer]);
      if (received.length > MAX_INFO_BYTES + 64) throw infoError('reply too large');
      text = bulkReply(received);
      if (text !== undefined) break;
    }
    if (text === undefined) throw infoError('connection closed before the reply');
    const fields = new Map<string, string>();
    for (const line of text.split('\r\n')) {
      const colon = line.indexOf(':');
      if (line.startsWith('#') || colon < 0) continue;
      fields.set(line.slice(0, colon), line.slice(colon + 1));
    }
    return fields;
  } finally {
    socket.destroy();
  }
}

export async function startRedisServer(): Promise<RedisServer> {
  const bin = findBinary(REDIS_CANDIDATES, 'redis-server');
  const port = await freePort();
  const child = await spawnListening(
    'redis-server',
    bin,
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    port,
  );
  return {
    url: `redis://127.0.0.1:${port}`,
    pid: child.pid!,
    process: child,
    info: () => readRedisInfo(port),
    stop: () => stopNative(child),
  };
}
