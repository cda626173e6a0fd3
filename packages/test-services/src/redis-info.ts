import { once } from 'node:events';
import { Socket } from 'node:net';
import { ServiceError, ServiceErrorCode } from './errors.js';

/*
 * Raw RESP over a plain socket: the bench and the tests need PING and INFO from a redis-server they started,
 * so this package carries no client library for it.
 */

/** INFO all is a few KB; anything far larger is not an INFO reply. */
const MAX_INFO_BYTES = 1024 * 1024;
const REPLY_TIMEOUT_MS = 5_000;

function replyError(why: string): ServiceError {
  return new ServiceError(ServiceErrorCode.REPLY, `redis-server INFO failed: ${why}`);
}

/** Parses one RESP bulk-string reply (`$<len>\r\n<bytes>\r\n`) once it is complete; undefined until then. */
function bulkReply(buffer: Buffer): string | undefined {
  const lineEnd = buffer.indexOf('\r\n');
  if (lineEnd < 0) return undefined;
  const head = buffer.subarray(0, lineEnd).toString('latin1');
  if (head.startsWith('-')) throw replyError(head.slice(1));
  const length = head.startsWith('$') ? Number(head.slice(1)) : Number.NaN;
  if (!Number.isSafeInteger(length) || length < 0 || length > MAX_INFO_BYTES) {
    throw replyError(`unexpected reply ${JSON.stringify(head.slice(0, 40))}`);
  }
  const start = lineEnd + 2;
  if (buffer.length < start + length) return undefined;
  return buffer.subarray(start, start + length).toString('utf8');
}

/** Every `key:value` line of `INFO all` (memory, stats, commandstats, ...) of the redis-server on `port`. */
export async function readRedisInfo(port: number): Promise<Map<string, string>> {
  const socket = new Socket();
  socket.setTimeout(REPLY_TIMEOUT_MS, () => socket.destroy(replyError('no answer in time')));
  try {
    socket.connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write('INFO all\r\n');
    let received = Buffer.alloc(0);
    let text: string | undefined;
    for await (const chunk of socket) {
      received = Buffer.concat([received, chunk as Buffer]);
      if (received.length > MAX_INFO_BYTES + 64) throw replyError('reply too large');
      text = bulkReply(received);
      if (text !== undefined) break;
    }
    if (text === undefined) throw replyError('connection closed before the reply');
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

/** One PING: true on +PONG (false on an error reply such as NOAUTH, or no answer). */
export async function answersPing(port: number): Promise<boolean> {
  const socket = new Socket();
  socket.setTimeout(REPLY_TIMEOUT_MS, () => socket.destroy());
  try {
    socket.connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write('PING\r\n');
    const [data] = (await once(socket, 'data')) as [Buffer];
    return data.toString('latin1').startsWith('+PONG');
  } catch {
    return false;
  } finally {
    socket.destroy();
  }
}
