import { once } from 'node:events';
import { connect } from 'node:net';

/**
 * Writes raw request bytes on one fresh connection and collects everything until the peer closes, or
 * until `until` matches what arrived. For the cases a node:http client would tidy up: interim responses in
 * order, exact field lines, chunked trailers.
 */
export async function rawExchange(port: number, bytes: string, until?: RegExp): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.write(bytes, 'latin1'); // one byte per character, as a client puts obs-text on the wire
  let text = '';
  return new Promise((resolve, reject) => {
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (until?.test(text)) {
        socket.destroy();
        resolve(text);
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(text));
  });
}
