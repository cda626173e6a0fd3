import { parseArgs } from 'node:util';
import { createDelayLink } from './delay-link.js';

/*
 * One delay link in its own process, for `pnpm bench wan`: a network is not a process that also hashes what
 * the client receives. In the bench's own process the link shared an event loop with the client, and a
 * busy loop there held bytes longer than the round trip, which showed up as the tunnel's latency under load.
 *
 *   node delay-link-process.js --target <url> --rtt <ms> [--max-bytes <n>]
 *
 * Prints `{"event":"listening","url":...}` once ready; stops on SIGTERM.
 */

const { values } = parseArgs({
  options: {
    target: { type: 'string' },
    rtt: { type: 'string' },
    'max-bytes': { type: 'string' },
  },
});
const rttMs = Number(values.rtt);
const maxBytes = values['max-bytes'] === undefined ? undefined : Number(values['max-bytes']);
if (
  values.target === undefined ||
  !URL.canParse(values.target) ||
  !(rttMs >= 0) ||
  (maxBytes !== undefined && !(maxBytes > 0))
) {
  process.stderr.write('usage: delay-link-process --target <url> --rtt <ms> [--max-bytes <n>]\n');
  process.exit(2);
}
const target = new URL(values.target);
const link = await createDelayLink({
  target: { host: target.hostname.replace(/^\[|\]$/g, ''), port: Number(target.port) },
  rttMs,
  ...(maxBytes === undefined ? {} : { maxBytesInFlight: maxBytes }),
});
process.stdout.write(`${JSON.stringify({ event: 'listening', url: `http://127.0.0.1:${link.port}` })}\n`);
process.once('SIGTERM', () => {
  void link.close().then(() => process.exit(0));
});
