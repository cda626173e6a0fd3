// What bench/scripts/memory-sampler.ts recorded, at each process's peak VmRSS:
//   node bench/scripts/memory-samples-peak.ts <SAMPLER_DIR> [agent|edge]
// Per process: VmRSS, RssAnon and RssFile (MiB) at the peak; each thread's heap and spaces, array buffers and
// collections at the sample nearest it (MB of 10^6 bytes); the smaps split nearest it; the heap's live size
// after the last full collections.
import { readdirSync, readFileSync } from 'node:fs';

interface Sample {
  t: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  spaces: Record<string, [number, number]>;
  majors: number;
  majorMs: number;
  minors: number;
  minorMs: number;
  liveAfterMajor: number[];
  status?: Record<string, number>;
  smaps?: Record<string, number>;
}

const dir = process.argv[2];
const role = process.argv[3] ?? 'agent';
if (dir === undefined) throw new Error('usage: memory-samples-peak.ts <SAMPLER_DIR> [agent|edge]');

const processes = new Map<string, Map<string, Sample[]>>();
for (const name of readdirSync(dir).filter((file) => file.startsWith(`${role}-`))) {
  const [, pid, thread] = name.replace(/\.jsonl$/, '').split('-');
  const rows = readFileSync(`${dir}/${name}`, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Sample);
  const threads = processes.get(pid!) ?? new Map<string, Sample[]>();
  threads.set(thread!, rows);
  processes.set(pid!, threads);
}

const mib = (kib: number): string => (kib / 1024).toFixed(1);
const mb = (kb: number): string => (kb / 1e3).toFixed(1);
const space = (sample: Sample, name: string): string => mb(sample.spaces[name]?.[0] ?? 0);

for (const [pid, threads] of processes) {
  const main = threads.get('main');
  if (main === undefined || main.length === 0) continue;
  const rss = (sample: Sample): number => sample.status?.VmRSS ?? 0;
  const peak = main.reduce((a, b) => (rss(b) > rss(a) ? b : a));
  const nearest = (rows: Sample[]): Sample =>
    rows.reduce((a, b) => (Math.abs(b.t - peak.t) < Math.abs(a.t - peak.t) ? b : a));
  const status = peak.status ?? {};
  process.stdout.write(
    `${role} ${pid}: peak VmRSS ${mib(status.VmRSS ?? 0)} MiB, RssAnon ${mib(status.RssAnon ?? 0)}, ` +
      `RssFile ${mib(status.RssFile ?? 0)}, ${status.Threads} threads, ${((peak.t - main[0]!.t) / 1000).toFixed(1)} s in\n`,
  );
  for (const [thread, rows] of threads) {
    const at = nearest(rows);
    process.stdout.write(
      `  ${thread}: heap ${mb(at.heapTotal)} MB (${mb(at.heapUsed)} used): old ${space(at, 'old')}, ` +
        `new ${space(at, 'new')}, large objects ${space(at, 'large_object')}, code ${space(at, 'code')}; ` +
        `array buffers ${mb(at.arrayBuffers)} (max ${mb(Math.max(...rows.map((r) => r.arrayBuffers)))}); ` +
        `full GCs ${at.majors} (${at.majorMs} ms), young ${at.minors} (${at.minorMs} ms); live after the last ` +
        `full GCs ${rows
          .flatMap((r) => r.liveAfterMajor)
          .slice(-6)
          .map(mb)
          .join(' ')}\n`,
    );
  }
  const withSmaps = main.filter((sample) => sample.smaps !== undefined);
  if (withSmaps.length > 0) {
    const split = nearest(withSmaps).smaps ?? {};
    process.stdout.write(
      `  smaps (MiB): [heap] ${mib(split.heap ?? 0)}, 64 MiB-aligned (malloc arenas) ${mib(split.arenas ?? 0)}, ` +
        `other anonymous ${mib(split.otherAnon ?? 0)}, files ${mib(split.file ?? 0)}\n`,
    );
  }
}
