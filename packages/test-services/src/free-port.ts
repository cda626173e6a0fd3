import { once } from 'node:events';
import { createServer } from 'node:net';

/**
 * A loopback port that was free a moment ago (listen on 0, close): for processes that must be told their
 * port up front, and for a port a test knows nothing listens on.
 */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  server.close();
  await once(server, 'close');
  if (address === null || typeof address === 'string') throw new Error('no TCP address');
  return address.port;
}
