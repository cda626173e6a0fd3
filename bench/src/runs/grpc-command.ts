import { FLAT_RSS_MB, type GrpcSettings, runGrpcBench } from '../scenarios/grpc-scenario.js';
import { numberFlag, type SideBySideCommand } from './side-by-side-command.js';

/** `pnpm bench grpc --help`. */
export const GRPC_USAGE = `usage: pnpm bench grpc [flags]

A grpc-js server (unary Echo, bidirectional Pipe echoing every message; raw-byte messages, no protobuf)
called by grpc-js clients in a process of their own, directly and through the tunnel (tunnel2 http --h2c):
unary calls at a fixed rate and in a closed loop, then one bidi stream for --duration seconds. Beside
them, HTTP/1.1 through a second agent on the same edge at the same rate (autocannon, the test backend):
the yardstick for the tunnel's CPU per call. The edge's, the agent's and the server's CPU are read from
/proc; their RSS is sampled every 250 ms through the stream.

flags:
  --rate <calls/s>      the fixed rate of the unary calls and of the HTTP/1.1 row (default 500)
  --concurrency <n>     calls in flight in the closed loop, on one channel (default 50)
  --duration <s>        seconds per row (default 10)
  --warmup <s>          discarded load before each row, the same load (default 3)
  --unary-bytes <n>     unary request and answer size (default 400, about /loadtest/get's)
  --message-kib <n>     size of each message of the bidi stream (default 64)
  --out <dir>           report directory (default bench/results/grpc-<time>)

targets (issue #32; the gate, exit 1, fails on a missed one and on any failed call): 0 failed calls; tunnel
CPU per unary call ≤ 1.5× the HTTP/1.1 tunnel's per request at the same rate; the bidi stream through the
tunnel ≥ 0.5× the bytes per second direct, with the edge's and the agent's RSS growing by ≤ ${FLAT_RSS_MB} MiB.
A tunnel that cannot carry gRPC (an agent without --h2c, an edge without HTTP/2) is reported as not
measured, with the reason.
`;

export const grpcCommand: SideBySideCommand<GrpcSettings> = {
  usage: GRPC_USAGE,
  text: {
    title: 'gRPC through the tunnel',
    intro:
      'grpc-js unary calls (fixed rate, closed loop) and one bidirectional stream, directly and through the tunnel ' +
      '(tunnel2 http --h2c), clients in a process of their own; HTTP/1.1 through the same edge at the same rate as ' +
      `the yardstick for CPU per call. RSS of the edge, the agent and the server sampled through the stream ("flat": growth ≤ ${FLAT_RSS_MB} MiB).`,
  },
  flags: ['rate', 'concurrency', 'duration', 'warmup', 'unary-bytes', 'message-kib'],
  settings: (values) => ({
    ratePerSec: numberFlag(values, 'rate', 500, 1),
    concurrency: numberFlag(values, 'concurrency', 50, 1),
    durationSec: numberFlag(values, 'duration', 10, 1),
    warmupSec: numberFlag(values, 'warmup', 3, 0),
    unaryBytes: numberFlag(values, 'unary-bytes', 400, 0),
    messageKib: numberFlag(values, 'message-kib', 64, 1),
  }),
  run: runGrpcBench,
};
