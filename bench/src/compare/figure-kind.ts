/**
 * The four kinds of figure `--max-regress` gates, each with the direction that is worse, read from the
 * figure's key: every scenario names them alike (`p99`, `correctedP99Ms`, `rps`, `achievedRps`, `mbPerSec`,
 * `…CpuPerRequestUs`, `peakRssMb`, `rss.edge.max`), and the success rate (`successPct`), which
 * `--max-error-rise` gates in percentage points. Every other figure is compared but not gated.
 */
export type FigureKind = 'p99' | 'throughput' | 'cpu' | 'rss' | 'success' | 'other';

export const GATED_KINDS: readonly FigureKind[] = ['p99', 'throughput', 'cpu', 'rss', 'success'];

/** Whether a higher value of this kind is better; null for figures that are not gated. */
export function higherIsBetter(kind: FigureKind): boolean | null {
  if (kind === 'throughput' || kind === 'success') return true;
  if (kind === 'other') return null;
  return false;
}

const segments = (key: string): string[] => key.split('.').map((s) => s.replace(/\[.*\]$/, ''));

export function figureKind(key: string): FigureKind {
  const names = segments(key);
  const leaf = names[names.length - 1] ?? '';
  const parent = names[names.length - 2] ?? '';
  // Ratios and differences of two figures (tunnel over direct, added p99) move with both: not gated.
  if (/Over|Ratio|^added|ratio/.test(leaf) || /^(ratios|comparison|inspectorCost)$/.test(parent)) {
    return 'other';
  }
  if (/^((corrected)?p99(Ms)?|typicalSecondP99Ms)$/i.test(leaf)) return 'p99';
  if (leaf === 'successPct') return 'success';
  if (/cpuPer(Request|Call)Us$/i.test(leaf) || /cpuPer(Request|Call)Us$/i.test(parent)) return 'cpu';
  if (/rss/i.test(leaf) || names.some((n) => /^rss$/i.test(n)) || /^(peak|end)Mb$/.test(leaf)) {
    // Where it started is the state before the run, not what the run cost.
    return /before|start|first/i.test(leaf) ? 'other' : 'rss';
  }
  if (
    /^(achievedRps|rps|mbPerSec|bytesPerSec|claimsPerSec)$/.test(leaf) ||
    (/(Rps|MBps|Mbps)$/.test(leaf) && !/^(offered|target)/.test(leaf)) ||
    /(Mbps|MBps)$/.test(parent)
  ) {
    return 'throughput';
  }
  return 'other';
}
