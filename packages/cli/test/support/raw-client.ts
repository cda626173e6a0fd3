import { once } from 'node:events';
import { connect } from 'node:net';

/** Sends raw bytes on a fresh connection and resolves with everything received until the edge closes it. */
export async function rawRequest(port: number, bytes: string): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.on('error', () => {});
  socket.write(bytes);
  let text = '';
  socket.on('data', (chunk: Buffer) => {
    text += chunk.toString('latin1');
  });
  await once(socket, 'close');
  return text;
}
