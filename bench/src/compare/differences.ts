/**
 * What differs between the two runs other than the code: the machine (`environment`: on GitHub's hosted
 * runners two runs of one workflow can land on CPUs of different models, which moves every figure) and the
 * run's settings (`settings`, or a standalone scenario's `result.settings`). Shown beside the verdict, so a
 * change is not read as the code's when the runs were not made alike. URLs and ports change every run
 * (the kit picks free ports): left out.
 */

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The longest a value is shown: a report is read as hostile data, and this goes into a PR comment. */
const MAX_VALUE_CHARS = 80;

function show(value: unknown): string {
  const text = value === undefined ? '(none)' : typeof value === 'string' ? value : JSON.stringify(value);
  const line = text.replace(/[\r\n\t]+/g, ' ');
  return line.length > MAX_VALUE_CHARS ? `${line.slice(0, MAX_VALUE_CHARS - 1)}…` : line;
}

function sections(json: Record<string, unknown>): Array<[string, Record<string, unknown>]> {
  const found: Array<[string, Record<string, unknown>]> = [];
  if (isRecord(json.environment)) found.push(['environment', json.environment]);
  if (isRecord(json.settings)) found.push(['settings', json.settings]);
  if (isRecord(json.result) && isRecord(json.result.settings)) {
    found.push(['result.settings', json.result.settings]);
  }
  return found;
}

/** `section.field: base → head` for each top-level field of those sections that differs. */
export function runDifferences(base: Record<string, unknown>, head: Record<string, unknown>): string[] {
  const after = new Map(sections(head));
  const lines: string[] = [];
  for (const [name, before] of sections(base)) {
    const now = after.get(name);
    if (now === undefined) continue;
    const fields = [...new Set([...Object.keys(before), ...Object.keys(now)])];
    for (const field of fields) {
      if (/url|port/i.test(field)) continue;
      const b = before[field];
      const h = now[field];
      if (JSON.stringify(b) === JSON.stringify(h)) continue;
      lines.push(`${name}.${field}: ${show(b)} → ${show(h)}`);
    }
  }
  return lines;
}
