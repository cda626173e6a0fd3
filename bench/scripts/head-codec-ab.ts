// The edge's per-request head work in a loop, this tree's protocol build against another's (issue #34): for
// each request, `withoutHopByHop` of a typical public request head and its encoding (`encodeRequestHead`),
// then the decoding of a typical response head (`decodeResponseHead`) and its `withoutHopByHop`. Both builds
// are loaded in one process and alternated (each batch's order swapped), so the machine's swings fall on
// both; prints ns per request for each batch and the medians' ratio this ÷ other.
//   node bench/scripts/head-codec-ab.ts <other-tree> [batches=6] [requests per batch=500000]
// MODE=codec leaves out withoutHopByHop, MODE=hop leaves out the codec; MODE=check runs only the edge's
// `checkResponseHead` of that response head. Build both trees first.
import { join, resolve } from 'node:path';
import * as hereCheck from '../../packages/edge/dist/exchange/response-head-check.js';
import * as here from '../../packages/protocol/dist/index.js';

type Protocol = typeof here;
type Check = typeof hereCheck;

const args = process.argv.slice(2);
if (args[0] === undefined) {
  process.stderr.write('usage: head-codec-ab.ts <other-tree> [batches] [requests]\n');
  process.exit(2);
}
const other = (await import(join(resolve(args[0]), 'packages/protocol/dist/index.js'))) as Protocol;
const otherCheck = (await import(
  join(resolve(args[0]), 'packages/edge/dist/exchange/response-head-check.js')
)) as Check;
const batches = Number(args[1] ?? 6);
const requests = Number(args[2] ?? 500_000);
const mode = process.env.MODE ?? 'all';

// biome-ignore format: one name/value pair per line
const requestFields = [
  'Host', 'app.example.test:8080',
  'User-Agent', 'autocannon',
  'Accept', '*/*',
  'Connection', 'keep-alive',
  'X-Request-Id', '3f9c1a0b7e2d4c55-1a2b',
  'X-Forwarded-For', '127.0.0.1',
  'X-Forwarded-Proto', 'http',
  'X-Forwarded-Host', 'app.example.test:8080',
];
const responsePayload = here.encodeResponseHead(
  {
    status: 200,
    statusMessage: 'OK',
    // biome-ignore format: one name/value pair per line
    headers: [
      'content-type', 'text/plain',
      'content-length', '2',
      'date', 'Sun, 29 Nov 2026 07:00:00 GMT',
      'keep-alive', 'timeout=5',
    ],
  },
  1 << 20,
);
const decodedResponse = here.decodeResponseHead(responsePayload);

function run(lib: Protocol, n: number): number {
  let sink = 0;
  const started = process.hrtime.bigint();
  const checks = lib === here ? hereCheck : otherCheck;
  if (mode === 'check') {
    for (let i = 0; i < n; i++)
      if (checks.checkResponseHead(decodedResponse, { method: 'GET', upgrade: false }).ok) sink++;
    if (sink === 0) throw new Error('nothing was accepted');
    return Number(process.hrtime.bigint() - started) / n;
  }
  for (let i = 0; i < n; i++) {
    const fields = mode === 'codec' ? requestFields : lib.withoutHopByHop(requestFields);
    if (mode !== 'hop')
      sink += lib.encodeRequestHead(
        { method: 'GET', target: '/loadtest/get', headers: fields },
        1 << 20,
      ).length;
    const response = mode === 'hop' ? decodedResponse : lib.decodeResponseHead(responsePayload);
    sink += mode === 'codec' ? response.headers.length : lib.withoutHopByHop(response.headers).length;
  }
  if (sink === 0) throw new Error('nothing was encoded');
  return Number(process.hrtime.bigint() - started) / n;
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

// Warm both up to their optimized code first.
for (let i = 0; i < 3; i++) {
  run(other, 200_000);
  run(here, 200_000);
}
const times = { other: [] as number[], this: [] as number[] };
for (let b = 0; b < batches; b++) {
  const order = b % 2 === 0 ? (['this', 'other'] as const) : (['other', 'this'] as const);
  for (const side of order) times[side].push(run(side === 'this' ? here : other, requests));
  process.stdout.write(
    `batch ${b + 1}: other ${times.other.at(-1)!.toFixed(0)} ns, this ${times.this.at(-1)!.toFixed(0)} ns per request\n`,
  );
}
const ratio = median(times.this) / median(times.other);
process.stdout.write(
  `mode ${mode}: median other ${median(times.other).toFixed(0)} ns, this ${median(times.this).toFixed(0)} ns; this ÷ other ${ratio.toFixed(3)}\n`,
);
