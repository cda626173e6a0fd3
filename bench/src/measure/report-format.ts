import type { ProcessUsageReport, Settings, StageReport } from '../plan/report-schema.js';
import { LOW_SAMPLE_MARK, type PercentileKey } from '../plan/sample-sufficiency.js';

/** How numbers read in report.md and report.html (report.json keeps them raw). */

/** `n` with `digits` decimals, "–" when unknown or not finite. */
export function fixed(n: number | null | undefined, digits = 0): string {
  return n !== null && n !== undefined && Number.isFinite(n) ? n.toFixed(digits) : '–';
}

export function ms(value: number): string {
  if (value >= 100) return value.toFixed(0);
  if (value >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

/** A figure with the too-few-samples mark when `key` is among the flagged percentiles. */
export function marked(
  value: string,
  key: PercentileKey,
  flagged: readonly PercentileKey[] | undefined,
): string {
  return flagged?.includes(key) === true ? `${value} ${LOW_SAMPLE_MARK}` : value;
}

export function rps(value: number): string {
  return value >= 100 ? value.toFixed(0) : value.toFixed(1);
}

export function pct(value: number): string {
  return value === 100 ? '100' : value.toFixed(2);
}

export function count(value: number): string {
  return value.toLocaleString('en-US');
}

export function ratio(value: number): string {
  return `${value.toFixed(2)}×`;
}

export function signedMs(value: number): string {
  return `${value >= 0 ? '+' : '−'}${ms(Math.abs(value))}`;
}

export function errorsText(errors: Record<string, number>): string {
  const entries = Object.entries(errors).filter(([, n]) => n > 0);
  return entries.length === 0 ? '0' : entries.map(([kind, n]) => `${kind}: ${count(n)}`).join(', ');
}

/** "262 µs" (whole µs from 100 up), "–" when unknown. */
export function microseconds(us: number | null | undefined): string {
  if (us === null || us === undefined) return '–';
  return `${us >= 100 ? count(Math.round(us)) : us.toFixed(1)} µs`;
}

export function usageText(usage: ProcessUsageReport | null | undefined): string {
  if (usage === null || usage === undefined) return '–';
  return (
    `${count(usage.cpuMs)} ms (${usage.cpuPct.toFixed(0)} %) · ${microseconds(usage.cpuPerRequestUs)}/req · ` +
    `${usage.peakRssMb.toFixed(0)} MB`
  );
}

/** "100 RPS" for a fixed-rate stage, "50 conn" for a closed-loop one. */
export function stageLabel(stage: StageReport): string {
  return stage.targetRps === null ? `${stage.connections} conn` : `${stage.targetRps} RPS`;
}

/** The request every stage sent, for the report's header: `GET /a, /b · expect 2xx · headers: x-a`. */
export function requestLine(settings: Settings): string {
  const request = settings.request;
  if (request === undefined) return `GET ${settings.path}`;
  const parts = [
    `${request.method} ${request.paths.join(', ')}`,
    `expect ${request.expectStatus.join(', ')}`,
  ];
  const headers = Object.keys(request.headers);
  if (headers.length > 0) parts.push(`headers: ${headers.join(', ')}`);
  if (request.bodyBytes > 0) parts.push(`body ${request.bodyBytes} bytes`);
  return parts.join(' · ');
}

/** What each side was: the kit's own processes, the user's --target, or a given --tunnel-url. */
export function sidesLine(settings: Settings): string {
  const direct =
    settings.targetUrl == null ? 'direct: the test backend' : `direct: ${settings.targetUrl} (--target)`;
  const tunnel =
    settings.tunnelUrl === null
      ? null
      : settings.tunnelGiven === true
        ? `tunnel: ${settings.tunnelUrl} (--tunnel-url)`
        : settings.replicas !== undefined
          ? `tunnel: ${settings.tunnelUrl} (an edge and ${settings.replicas} agents serving the name as replicas, ` +
            'each in front of its own test backend process, started by the kit on loopback; the backend and ' +
            'agent CPU figures add them up)'
          : `tunnel: ${settings.tunnelUrl} (an edge and an agent started by the kit on loopback${
              settings.targetUrl?.startsWith('https:') === true
                ? "; the kit's agent runs with --insecure: the target's certificate is not checked, as on the direct side"
                : ''
            })`;
  return [
    settings.sides.includes('direct') ? direct : null,
    settings.sides.includes('tunnel') ? tunnel : null,
  ]
    .filter((part) => part !== null)
    .join(' · ');
}

/** The median of the finite values, or null when there is none. */
/** `a / b` of two figures of one run, null when either is unknown or `b` is not positive (nothing to divide by). */
export function ratioOf(a: number | null | undefined, b: number | null | undefined): number | null {
  return a != null && b != null && b > 0 ? a / b : null;
}

export function median(values: readonly number[]): number | null {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
