import { Client, credentials, Metadata, type ServiceError, status as Status } from '@grpc/grpc-js';
import { createLatencyRecorder } from '../measure/latency-recorder.js';
import type { RowLoad } from '../measure/side-by-side-rows.js';
import { BENCH_SERVICE } from './grpc-bench-service.js';

/*
 * The gRPC load of `pnpm bench grpc`, a grpc-js client in a process of its own (so its CPU is neither the
 * bench's nor the measured processes'): one channel, and per run one of
 * - probe: one Echo call; prints {"event":"probe","ok":...,"error":...};
 * - unary-rate: Echo calls sent at start + k/R, each with its own deadline (open loop);
 * - unary-closed: `concurrency` calls in flight, each sent when the previous one answered;
 * - bidi: one Pipe stream writing `messageBytes` messages for the duration, honouring write()'s backpressure,
 *   the server echoing each; the bytes received back are counted.
 * Prints one {"event":"result", ...RowLoad} line and exits.
 */

export interface GrpcClientSpec {
  mode: 'probe' | 'unary-rate' | 'unary-closed' | 'bidi';
  /** host:port the channel connects to. */
  address: string;
  /** :authority of every call (the tunnel routes by it). */
  authority: string;
  durationSec: number;
  ratePerSec: number;
  concurrency: number;
  messageBytes: number;
  timeoutSec: number;
}

const raw = (buffer: Buffer): Buffer => buffer;

function errorKind(err: ServiceError): string {
  return `grpc_${Status[err.code] ?? err.code}`;
}

async function unary(client: Client, spec: GrpcClientSpec): Promise<RowLoad> {
  const payload = Buffer.alloc(spec.messageBytes, 0x61);
  const latency = createLatencyRecorder(undefined);
  const errors: Record<string, number> = {};
  let requests = 0;
  let ok = 0;
  let bytes = 0;
  let pending = 0;
  let drained: (() => void) | undefined;
  const call = (onDone?: () => void): void => {
    pending += 1;
    const sentAt = performance.now();
    client.makeUnaryRequest(
      BENCH_SERVICE.echo.path,
      raw,
      raw,
      payload,
      new Metadata(),
      { deadline: Date.now() + spec.timeoutSec * 1000 },
      (err, answer) => {
        pending -= 1;
        requests += 1;
        if (err !== null) errors[errorKind(err)] = (errors[errorKind(err)] ?? 0) + 1;
        else {
          ok += 1;
          bytes += answer?.length ?? 0;
          latency.record(performance.now() - sentAt);
        }
        onDone?.();
        if (pending === 0) drained?.();
      },
    );
  };
  const startAt = performance.now();
  const stopAt = startAt + spec.durationSec * 1000;
  if (spec.mode === 'unary-rate') {
    const total = Math.floor(spec.ratePerSec * spec.durationSec);
    let next = 0;
    await new Promise<void>((resolve) => {
      const tick = (): void => {
        const due = Math.min(total, Math.floor(((performance.now() - startAt) / 1000) * spec.ratePerSec) + 1);
        while (next < due) {
          next += 1;
          call();
        }
        if (next >= total) resolve();
        else setTimeout(tick, Math.max(0, startAt + (next * 1000) / spec.ratePerSec - performance.now()));
      };
      tick();
    });
  } else {
    const loop = (): void => {
      if (performance.now() < stopAt) call(loop);
    };
    for (let i = 0; i < spec.concurrency; i += 1) loop();
  }
  if (spec.mode === 'unary-closed')
    await new Promise<void>((resolve) => setTimeout(resolve, spec.durationSec * 1000));
  if (pending > 0) await new Promise<void>((resolve) => (drained = resolve));
  const durationSec = (performance.now() - startAt) / 1000;
  const measured = latency.raw();
  latency.destroy();
  return {
    durationSec,
    requests,
    ok,
    errors,
    latencyMs: ok === 0 ? { p50: null, p99: null, mean: null, max: null } : measured,
    bytes,
    // Every due call is sent: a channel queues what it cannot start yet, so none is skipped.
    missedSlots: spec.mode === 'unary-rate' ? 0 : null,
  };
}

function bidi(client: Client, spec: GrpcClientSpec): Promise<RowLoad> {
  const payload = Buffer.alloc(spec.messageBytes, 0x62);
  const stream = client.makeBidiStreamRequest(BENCH_SERVICE.pipe.path, raw, raw, new Metadata(), {
    deadline: Date.now() + (spec.durationSec + spec.timeoutSec) * 1000,
  });
  const startAt = performance.now();
  const stopAt = startAt + spec.durationSec * 1000;
  let received = 0;
  let messages = 0;
  let ended = false;
  const end = (): void => {
    if (ended) return;
    ended = true;
    stream.end();
  };
  const write = (): void => {
    while (!ended && performance.now() < stopAt) {
      if (!stream.write(payload)) {
        stream.once('drain', write);
        return;
      }
    }
    end();
  };
  // A stream stuck waiting for 'drain' at the end still ends on time.
  const stopper = setTimeout(end, spec.durationSec * 1000);
  return new Promise((resolve) => {
    stream.on('data', (message: Buffer) => {
      received += message.length;
      messages += 1;
    });
    stream.on('error', () => {});
    stream.on('status', (final) => {
      clearTimeout(stopper);
      const errors: Record<string, number> = {};
      if (final.code !== Status.OK) errors[`grpc_${Status[final.code] ?? final.code}`] = 1;
      resolve({
        durationSec: (performance.now() - startAt) / 1000,
        requests: messages,
        ok: messages,
        errors,
        latencyMs: { p50: null, p99: null, mean: null, max: null },
        bytes: received,
        missedSlots: null,
      });
    });
    write();
  });
}

function probe(client: Client, spec: GrpcClientSpec): Promise<{ ok: boolean; error: string | null }> {
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      BENCH_SERVICE.echo.path,
      raw,
      raw,
      Buffer.from('probe'),
      new Metadata(),
      { deadline: Date.now() + spec.timeoutSec * 1000 },
      (err) =>
        resolve(
          err === null
            ? { ok: true, error: null }
            : { ok: false, error: `${Status[err.code] ?? err.code}: ${err.details}` },
        ),
    );
  });
}

const spec = JSON.parse(process.argv[2] ?? '{}') as GrpcClientSpec;
const client = new Client(spec.address, credentials.createInsecure(), {
  'grpc.default_authority': spec.authority,
  'grpc.max_receive_message_length': -1,
  'grpc.max_send_message_length': -1,
});
const line =
  spec.mode === 'probe'
    ? { event: 'probe', ...(await probe(client, spec)) }
    : { event: 'result', ...(spec.mode === 'bidi' ? await bidi(client, spec) : await unary(client, spec)) };
client.close();
process.stdout.write(`${JSON.stringify(line)}\n`);
