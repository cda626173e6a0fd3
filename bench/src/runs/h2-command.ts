import { type H2Settings, runH2Bench } from '../scenarios/h2-scenario.js';
import type { SideBySideCommand } from './side-by-side-command.js';
import { numberFlag, ratesFlag } from './side-by-side-command.js';

/** `pnpm bench h2 --help`. */
export const H2_USAGE = `usage: pnpm bench h2 [flags]

HTTP/2 through the tunnel (h2c with prior knowledge on the edge's plain port, the agent forwarding to the
HTTP/1.1 test backend) beside HTTP/1.1 through the same edge and agent, each beside its direct side (an h2c
server with the test backend's body for the h2 rows). At each fixed rate: HTTP/1.1 paced by autocannon, h2
by a paced node:http2 client (Debian's h2load 1.52 has no request rate); then a closed loop: h2load
(apt-get install nghttp2-client) -c <connections> -m <streams> against autocannon with connections × streams.
Reported: requests/s, latency, errors, CPU per request of the edge, the agent and the backend.

flags:
  --rates <rps,...>   fixed rates (default 200,1000)
  --connections <n>   h2 connections: the paced client's sessions and h2load -c (default 10)
  --streams <n>       h2load -m, and the paced client's streams per session at most (default 10)
  --duration <s>      seconds per row (default 10)
  --warmup <s>        discarded load before each row, the same load (default 3)
  --path <path>       GET path on the test backend (default /loadtest/get)
  --out <dir>         report directory (default bench/results/h2-<time>)

targets (issue #32; the gate, exit 1, fails on a missed one and on any failed request): 0 errors; tunnel
CPU per request over h2 ≤ the HTTP/1.1 tunnel's at the same rate. A row the edge cannot serve (no h2c
ingress) is reported as not measured, with the reason, and its target as not measured.
`;

export const h2Command: SideBySideCommand<H2Settings> = {
  usage: H2_USAGE,
  text: {
    title: 'HTTP/2 through the tunnel',
    intro:
      'h2c with prior knowledge to the edge, the agent forwarding to the HTTP/1.1 test backend, beside HTTP/1.1 ' +
      'through the same edge and agent and beside each protocol direct. Fixed rates: autocannon (HTTP/1.1, ' +
      'paced) and a paced node:http2 client; closed loop: h2load -c C -m S against autocannon with C × S ' +
      "connections. Target: tunnel CPU per request over h2 at most the HTTP/1.1 tunnel's at the same rate.",
  },
  flags: ['rates', 'connections', 'streams', 'duration', 'warmup', 'path'],
  settings: (values) => {
    const path = typeof values.path === 'string' ? values.path : '/loadtest/get';
    return {
      rates: ratesFlag(values, 'rates', [200, 1000]),
      connections: numberFlag(values, 'connections', 10, 1),
      streams: numberFlag(values, 'streams', 10, 1),
      durationSec: numberFlag(values, 'duration', 10, 1),
      warmupSec: numberFlag(values, 'warmup', 3, 0),
      path: path.startsWith('/') ? path : `/${path}`,
    };
  },
  run: runH2Bench,
};
