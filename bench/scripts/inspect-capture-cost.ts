// The inspector's capture path alone, in a heap shaped like the agent's: what one request costs in CPU with
// capture on against off, measured in one process, interleaved and repeated (the machine may be noisy).
//   node bench/scripts/inspect-capture-cost.ts [requests=100000] [rounds=7]
// Runs in a worker with the agent's heap settings (a 3 MB young generation, bin/tunnel2.js), keeps 50
// requests' worth of objects alive and drops ~16 KB of per-request garbage, as the agent's own work does,
// and records each request as the agent does (encoded heads, one response chunk), each open while the 50
// requests after it start (as 50 exchanges in flight: what a recorder keeps then outlives scavenges). Build
// first.
// INSPECTOR_MODULE=<path of an index.js or index.ts> measures another copy of the package (an A/B of two).
import { setFlagsFromString } from 'node:v8';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

interface Result {
  mode: 'off' | 'on';
  nsPerRequest: number;
}

const requests = Number(process.argv[2] ?? 100_000);
const rounds = Number(process.argv[3] ?? 7);

async function measure(mode: 'off' | 'on', count: number): Promise<Result> {
  const modulePath =
    process.env.INSPECTOR_MODULE ?? new URL('../../packages/inspector/dist/index.js', import.meta.url).href;
  const inspector = (await import(modulePath)) as typeof import('../../packages/inspector/src/index.js');
  const { encodeRequestHead, encodeResponseHead } = (await import(
    new URL('../../packages/protocol/dist/index.js', import.meta.url).href
  )) as typeof import('../../packages/protocol/src/index.js');
  const store = new inspector.EntryStore();
  const capture = mode === 'on' ? inspector.createCapture(store, 1024 * 1024) : undefined;
  const requestHeaders = ['host', 'bench.localhost:8080', 'user-agent', 'undici', 'accept', '*/*'];
  requestHeaders.push('x-forwarded-for', '127.0.0.1', 'x-forwarded-proto', 'http', 'x-request-id', '');
  const responseHeaders = ['content-type', 'text/plain', 'content-length', '13', 'keep-alive', 'timeout=5'];
  // The agent's own live set and garbage: 50 requests in flight, each with its objects and buffers.
  const inFlight: unknown[] = new Array(50).fill(null);
  type Recorder = NonNullable<ReturnType<NonNullable<typeof capture>['begin']>>;
  const open: (Recorder | undefined)[] = new Array(50).fill(undefined);
  const started = process.cpuUsage();
  for (let i = 0; i < count; i++) {
    const garbage = Array.from({ length: 40 }, (_, k) => ({ k, s: `field-${k}-${i}`, b: Buffer.alloc(64) }));
    inFlight[i % 50] = garbage;
    requestHeaders[11] = `req-${i}`;
    const target = `/loadtest/get?i=${i}`;
    const payload = encodeRequestHead({ method: 'GET', target, headers: requestHeaders }, 1 << 16);
    const recorder = capture?.begin({ method: 'GET', target, headers: requestHeaders, encodedHead: payload });
    const head = encodeResponseHead({ status: 200, statusMessage: 'OK', headers: responseHeaders }, 1 << 16);
    recorder?.responseHead(200, responseHeaders, head);
    recorder?.responseData(Buffer.from('hello, world!'));
    open[i % 50]?.finish();
    open[i % 50] = recorder;
  }
  for (const recorder of open) recorder?.finish();
  const cpu = process.cpuUsage(started);
  return { mode, nsPerRequest: ((cpu.user + cpu.system) * 1000) / count };
}

function inWorker(mode: 'off' | 'on'): Promise<Result> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), {
      argv: process.argv.slice(2),
      workerData: { mode },
      resourceLimits: { maxYoungGenerationSizeMb: 3 },
    });
    worker.once('message', resolve);
    worker.once('error', reject);
  });
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

if (!isMainThread) {
  const { mode } = workerData as { mode: 'off' | 'on' };
  await measure(mode, Math.min(20_000, requests)); // warm-up: JIT and heap reach their steady state
  parentPort!.postMessage(await measure(mode, requests));
} else {
  // As bin/tunnel2.js sets them for the agent (V8 flags are per process, read by the workers too).
  setFlagsFromString('--heap-growing-percent=300');
  setFlagsFromString('--no-allocation-site-pretenuring');
  const samples: Record<'off' | 'on', number[]> = { off: [], on: [] };
  for (let round = 0; round < rounds; round++) {
    for (const mode of ['off', 'on'] as const) {
      const { nsPerRequest } = await inWorker(mode);
      samples[mode].push(nsPerRequest);
      process.stdout.write(`${mode.padEnd(3)} ${round + 1}  ${nsPerRequest.toFixed(0)} ns/request (CPU)\n`);
    }
  }
  const off = median(samples.off);
  const on = median(samples.on);
  const spread = (v: number[]): string => `${Math.min(...v).toFixed(0)}–${Math.max(...v).toFixed(0)}`;
  process.stdout.write(
    `median off ${off.toFixed(0)} ns (${spread(samples.off)}), on ${on.toFixed(0)} ns (${spread(samples.on)})\n`,
  );
  // The minimum is the run least disturbed by the rest of the machine: its difference is the steadier one.
  const least = Math.min(...samples.on) - Math.min(...samples.off);
  process.stdout.write(
    `capture costs ${(on - off).toFixed(0)} ns of CPU per request (medians), ${least.toFixed(0)} ns (minimums)\n`,
  );
}
