import { once } from 'node:events';
import { connect } from 'node:net';

/**
 * Sends a request as raw bytes (latin1, so obs-text goes out byte for byte) on a fresh connection and
 * resolves with everything received, as latin1, until the edge closes it.
 */
export async function rawExchange(port: number, bytes: string): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.on('error', () => {});
  socket.write(bytes, 'latin1');
  let text = '';
  socket.on('data', (chunk: Buffer) => {
    text += chunk.toString('latin1');
  });
  await once(socket, 'close');
  return text;
}
