import { createServer } from 'node:http2';
import { parseArgs } from 'node:util';

/*
 * The direct side of `pnpm bench h2`'s HTTP/2 rows: an h2c (prior knowledge) server that answers every
 * request with the test backend's own body for the path, fetched once at start, so the direct h2 row and
 * the tunnel's HTTP/1.1 backend send the same bytes. Prints {"event":"listening","url":...} when ready.
 */

const { values } = parseArgs({ options: { 'body-url': { type: 'string' } } });
const bodyUrl = values['body-url'];
if (bodyUrl === undefined) throw new Error('--body-url <test backend URL with path> is required');
const answer = await fetch(bodyUrl);
const body = Buffer.from(await answer.arrayBuffer());
const contentType = answer.headers.get('content-type') ?? 'application/octet-stream';

const server = createServer();
server.on('stream', (stream) => {
  stream.on('error', () => {});
  stream.respond({ ':status': 200, 'content-type': contentType, 'content-length': body.length });
  stream.end(body);
  // The request's own body, if any, is read and dropped.
  stream.resume();
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no TCP address');
  process.stdout.write(
    `${JSON.stringify({ event: 'listening', url: `http://127.0.0.1:${address.port}` })}\n`,
  );
});
process.once('SIGTERM', () => {
  server.close();
  process.exit(0);
});
