import { BenchError, BenchErrorCode } from '../errors.js';
import { bulkDownload, bulkUpload } from '../measure/bulk-client.js';
import { meterSelf, readCpuMs, readStatusKb } from '../measure/process-stats.js';
import { fixed, ratioOf } from '../measure/report-format.js';
import type { SideName } from '../plan/report-schema.js';
import { type BenchStack, startBenchStack, targetOf } from '../stacks/bench-stack.js';
import type { ChildService } from '../stacks/child-service.js';
import { startRelay } from './floor-scenario.js';

/**
 * `pnpm bench bulk`: one large download and one large upload per side, measured as MB/s (10^6 bytes per
 * second), with the edge's and the agent's CPU and RSS sampled through the transfer (the RSS must stay
 * flat: nothing may buffer a body). Bodies are streamed with backpressure on both ends of the bench too,
 * so the bench itself never holds more than one chunk.
 *
 * The sides: direct (the backend alone), relay (the byte floor of `pnpm bench floor`: two Node.js processes
 * that multiplex client connections over one TCP connection and copy bytes, relay-floor-process.ts) and
 * tunnel. The relay is in the same run because issue #34 states the bulk target against it ("tunnel ≥ 0.85x
 * the byte floor"), and two runs minutes apart on this machine differ by more than that.
 */

/** The bulk sides: the staged scenarios' two, and the byte floor between them. */
export type BulkSideName = SideName | 'relay';

export interface BulkSettings {
  bytes: number;
  sides: BulkSideName[];
  /**
   * A transfer of this size, the same side and direction, runs right before each measured one and is
   * discarded: the first megabytes through fresh processes run unoptimized code. 0: none.
   */
  warmupBytes: number;
  /**
   * `--cold`: every transfer through freshly started processes (backend, edge, agent), with no warm-up: what
   * a user's first large transfer after `tunnel2 http` gets, JIT compilation and heap growth included.
   */
  cold: boolean;
}

export interface RssTrace {
  startMb: number;
  peakMb: number;
  endMb: number;
  cpuMs: number;
}

export interface BulkTransfer {
  direction: 'download' | 'upload';
  side: BulkSideName;
  bytes: number;
  seconds: number;
  mbPerSec: number;
  /** Bytes that did not arrive, or an error: a transfer that lost data is reported, never averaged in. */
  error: string | null;
  /** The discarded warm-up transfer right before this one (null when there was none); shown, not hidden. */
  warmup: { bytes: number; mbPerSec: number; error: string | null } | null;
  /** The tunnel's edge and agent, or on the relay side the relay's two processes; null on the direct side. */
  edge: RssTrace | null;
  agent: RssTrace | null;
  backend: RssTrace | null;
  /** CPU of the bench's own client (the whole bench process) during the transfer, ms: the instrument's cost. */
  clientCpuMs: number;
}

export interface BulkResult {
  scenario: 'bulk';
  bytes: number;
  warmupBytes: number;
  /** Each transfer ran through freshly started processes (`--cold`). */
  cold: boolean;
  transfers: BulkTransfer[];
  /** Per direction, the MB/s ratios of the sides that ran (null where one of the two did not, or failed). */
  ratios: { download: BulkRatios; upload: BulkRatios };
}

export interface BulkRatios {
  tunnelOverDirect: number | null;
  /** tunnel ÷ relay: issue #34's target 5 reads this one (≥ 0.85 warm). */
  tunnelOverFloor: number | null;
  floorOverDirect: number | null;
}

/** The processes one set of transfers runs through: the bench stack, and the relay pair in front of its backend. */
export interface BulkStack {
  stack: BenchStack;
  relay: { edge: ChildService; agent: ChildService } | undefined;
  close(): Promise<void>;
}

const UPLOAD_CHUNK = Buffer.alloc(256 * 1024, 0x5a);

/** Samples a process's RSS every 100 ms; the kernel's own peak (VmHWM) would include start-up. */
function traceProcess(service: ChildService | undefined): { stop(): RssTrace | null } {
  if (service === undefined) return { stop: () => null };
  const rss = (): number => (readStatusKb(service.pid, 'VmRSS') ?? Number.NaN) / 1024;
  const startMb = rss();
  const startCpu = readCpuMs(service.pid) ?? Number.NaN;
  let peakMb = startMb;
  const timer = setInterval(() => {
    peakMb = Math.max(peakMb, rss());
  }, 100);
  return {
    stop() {
      clearInterval(timer);
      const endMb = rss();
      return {
        startMb,
        peakMb: Math.max(peakMb, endMb),
        endMb,
        cpuMs: (readCpuMs(service.pid) ?? Number.NaN) - startCpu,
      };
    },
  };
}

async function measure(
  stack: BenchStack,
  side: SideName,
  direction: BulkTransfer['direction'],
  bytes: number,
): Promise<BulkTransfer> {
  const target = side === 'direct' ? stack.direct : stack.tunnel;
  if (target === undefined) throw new Error(`the ${side} side is not running`);
  const traces = [stack.edge, stack.agent, stack.backend].map((s) =>
    side === 'tunnel' || s === stack.backend ? traceProcess(s) : traceProcess(undefined),
  );
  const started = performance.now();
  const client = meterSelf();
  let moved = 0;
  let error: string | null = null;
  try {
    moved = await (direction === 'download'
      ? bulkDownload(target, bytes)
      : bulkUpload(target, bytes, UPLOAD_CHUNK));
    if (moved !== bytes) error = `${moved} of ${bytes} bytes arrived`;
  } catch (err) {
    error = err instanceof Error ? err.message : String(err);
  }
  const seconds = (performance.now() - started) / 1000;
  const clientCpuMs = client.stop()?.cpuMs ?? Number.NaN;
  const [edge, agent, backend] = traces.map((t) => t.stop());
  return {
    direction,
    side,
    warmup: null,
    bytes: moved,
    seconds,
    mbPerSec: moved / seconds / 1e6,
    error,
    edge: edge ?? null,
    agent: agent ?? null,
    backend: backend ?? null,
    clientCpuMs,
  };
}

async function warmUp(
  stack: BenchStack,
  side: SideName,
  direction: BulkTransfer['direction'],
  bytes: number,
): Promise<NonNullable<BulkTransfer['warmup']>> {
  const { mbPerSec, error } = await measure(stack, side, direction, bytes);
  return { bytes, mbPerSec, error };
}

/**
 * Opens the processes the given sides run through; `cold` opens a fresh set for every transfer, for its side
 * only, so a cold transfer shares the machine with no other side's processes still starting up.
 */
export type OpenStack = (sides: readonly BulkSideName[]) => Promise<BulkStack>;

/** The backend, the edge and agent when the tunnel side runs, the relay pair when the relay side runs. */
export async function openBulkStack(sides: readonly BulkSideName[]): Promise<BulkStack> {
  const stack = await startBenchStack({ tunnel: sides.includes('tunnel') });
  const started: ChildService[] = [];
  const close = async (): Promise<void> => {
    for (const service of started.splice(0).reverse()) await service.stop();
    await stack.close();
  };
  try {
    const relay = sides.includes('relay') ? await startRelay(stack.backend.readyValue, started) : undefined;
    return { stack, relay, close };
  } catch (err) {
    await close();
    throw err;
  }
}

export function bulkRatios(transfers: readonly BulkTransfer[]): BulkResult['ratios'] {
  const of = (direction: BulkTransfer['direction']): BulkRatios => {
    const mbps = (side: BulkSideName): number | null => {
      const t = transfers.find((x) => x.direction === direction && x.side === side);
      return t === undefined || t.error !== null ? null : t.mbPerSec;
    };
    const [direct, relay, tunnel] = [mbps('direct'), mbps('relay'), mbps('tunnel')];
    return {
      tunnelOverDirect: ratioOf(tunnel, direct),
      tunnelOverFloor: ratioOf(tunnel, relay),
      floorOverDirect: ratioOf(relay, direct),
    };
  };
  return { download: of('download'), upload: of('upload') };
}

/** One line per direction with the ratios it has, as the run's last lines and the report's summary say them. */
export function bulkSummaryLines(ratios: BulkResult['ratios']): string[] {
  return (['download', 'upload'] as const).flatMap((direction) => {
    const r = ratios[direction];
    const parts = [
      r.tunnelOverDirect === null ? [] : [`tunnel / direct = ${fixed(r.tunnelOverDirect, 2)}×`],
      r.tunnelOverFloor === null ? [] : [`tunnel / byte floor = ${fixed(r.tunnelOverFloor, 2)}×`],
      r.floorOverDirect === null ? [] : [`byte floor / direct = ${fixed(r.floorOverDirect, 2)}×`],
    ].flat();
    return parts.length === 0 ? [] : [`${direction}: ${parts.join(', ')}`];
  });
}

export async function runBulkBench(
  openStack: OpenStack,
  settings: BulkSettings,
  note: (line: string) => void,
): Promise<BulkResult> {
  const transfers: BulkTransfer[] = [];
  let opened: BulkStack | undefined;
  try {
    for (const direction of ['download', 'upload'] as const) {
      for (const side of settings.sides) {
        if (settings.cold) {
          await opened?.close();
          opened = undefined;
        }
        opened ??= await openStack(settings.cold ? [side] : settings.sides);
        transfers.push(await sideTransfer(opened, settings, direction, side, note));
      }
    }
  } finally {
    await opened?.close();
  }
  const ratios = bulkRatios(transfers);
  for (const line of bulkSummaryLines(ratios)) note(line);
  return {
    scenario: 'bulk',
    bytes: settings.bytes,
    warmupBytes: settings.warmupBytes,
    cold: settings.cold,
    transfers,
    ratios,
  };
}

/**
 * The relay is measured as the 'tunnel' of a view of the stack whose edge and agent are the relay's (as
 * `pnpm bench tcp` measures its floor), so its processes are traced exactly as the tunnel's are.
 */
async function sideTransfer(
  opened: BulkStack,
  settings: BulkSettings,
  direction: BulkTransfer['direction'],
  side: BulkSideName,
  note: (line: string) => void,
): Promise<BulkTransfer> {
  if (side !== 'relay') return transfer(opened.stack, settings, direction, side, note);
  const { stack, relay } = opened;
  if (relay === undefined) throw new BenchError(BenchErrorCode.STACK, 'the relay side is not running');
  // The relay passes bytes untouched: the backend sees the direct side's Host, as in `pnpm bench floor`.
  const view: BenchStack = {
    ...stack,
    edge: relay.edge,
    agent: relay.agent,
    tunnel: { ...targetOf(relay.edge.readyValue), host: stack.direct.host },
  };
  const measured = await transfer(view, settings, direction, 'tunnel', note, 'relay');
  return { ...measured, side: 'relay' };
}

/**
 * One measured transfer (after its warm-up) through `stack`'s side; `label` names it in the notes (another
 * scenario may measure its own pair of processes as the 'tunnel' side of a stack view).
 */
export async function transfer(
  stack: BenchStack,
  settings: Pick<BulkSettings, 'bytes' | 'warmupBytes' | 'cold'>,
  direction: BulkTransfer['direction'],
  side: SideName,
  note: (line: string) => void,
  label: string = side,
): Promise<BulkTransfer> {
  const warmup = settings.warmupBytes > 0 ? await warmUp(stack, side, direction, settings.warmupBytes) : null;
  if (warmup !== null) {
    note(
      `${direction} ${label}: warm-up ${(settings.warmupBytes / 2 ** 20).toFixed(0)} MiB (discarded): ` +
        (warmup.error ?? `${warmup.mbPerSec.toFixed(0)} MB/s`),
    );
  }
  note(
    `${direction} ${label}: ${(settings.bytes / 2 ** 20).toFixed(0)} MiB${settings.cold ? ', fresh processes' : ''}`,
  );
  const result = { ...(await measure(stack, side, direction, settings.bytes)), warmup };
  const rss =
    result.edge && result.agent
      ? `, RSS edge ${result.edge.startMb.toFixed(0)}→${result.edge.peakMb.toFixed(0)} MB, agent ` +
        `${result.agent.startMb.toFixed(0)}→${result.agent.peakMb.toFixed(0)} MB`
      : '';
  note(
    `  ${result.mbPerSec.toFixed(0)} MB/s in ${result.seconds.toFixed(2)} s${rss}, ` +
      `client CPU ${result.clientCpuMs.toFixed(0)} ms` +
      (result.error ? ` — ERROR: ${result.error}` : ''),
  );
  return result;
}
