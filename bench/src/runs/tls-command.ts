import { runTlsBench, type TlsSettings } from '../scenarios/tls-scenario.js';
import { numberFlag, ratesFlag, type SideBySideCommand } from './side-by-side-command.js';

/** `pnpm bench tls --help`. */
export const TLS_USAGE = `usage: pnpm bench tls [flags]

TLS at the edge (tunnel2 server --tls-cert/--tls-key, a throw-away ECDSA P-256 certificate made with openssl)
against the same edge behind Debian's HAProxy terminating TLS in front of it (keep-alive on both hops), at
the same fixed rate of HTTPS keep-alive requests (autocannon, HTTP/1.1), and the plain edge without TLS for
reference; then the same rate over h2 (ALPN; a paced node:http2 client; HAProxy passes h2 on as h2c).
Reported: requests/s, latency, errors, CPU per request of the TLS-terminating part (the edge, or HAProxy +
the edge) with the agent's and the backend's beside.

flags:
  --rates <rps,...>   fixed rates (default 500)
  --duration <s>      seconds per row (default 10)
  --warmup <s>        discarded load before each row, the same rate (default 3)
  --path <path>       GET path on the test backend (default /loadtest/get)
  --out <dir>         report directory (default bench/results/tls-<time>)

targets (issue #32; the gate, exit 1, fails on a missed one and on any failed request): 0 errors; TLS at the
edge costs less CPU per request than HAProxy + the edge, over HTTP/1.1 and over h2. An edge without
--tls-cert is reported as not measured, with the reason.
`;

export const tlsCommand: SideBySideCommand<TlsSettings> = {
  usage: TLS_USAGE,
  text: {
    title: 'TLS at the edge vs a separate terminator',
    intro:
      'HTTPS keep-alive requests at a fixed rate (autocannon) to the edge terminating TLS itself and to the same ' +
      'plain edge behind HAProxy terminating TLS, over HTTP/1.1 and over h2 (a paced node:http2 client; HAProxy ' +
      'speaks h2c to the edge); the plain edge without TLS for reference. "Between" CPU here is ' +
      'the TLS-terminating part: the edge, or HAProxy + the edge. Target: TLS at the edge costs less.',
  },
  flags: ['rates', 'rate', 'duration', 'warmup', 'path'],
  settings: (values) => {
    const path = typeof values.path === 'string' ? values.path : '/loadtest/get';
    return {
      rates: ratesFlag(values, typeof values.rates === 'string' ? 'rates' : 'rate', [500]),
      durationSec: numberFlag(values, 'duration', 10, 1),
      warmupSec: numberFlag(values, 'warmup', 3, 0),
      path: path.startsWith('/') ? path : `/${path}`,
    };
  },
  run: runTlsBench,
};
