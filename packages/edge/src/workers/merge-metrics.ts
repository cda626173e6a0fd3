/**
 * Merges the Prometheus text of several workers into one exposition: each sample gains a `worker` label,
 * and each metric family is written once (its HELP and TYPE, then every worker's samples), as the text
 * format wants a family's lines together. A scraper sums over `worker` for the whole edge.
 */
export function mergeWorkerMetrics(bodies: ReadonlyArray<{ worker: number; body: string }>): string {
  interface Family {
    head: string[];
    samples: string[];
  }
  const families = new Map<string, Family>();
  const familyOf = (name: string): Family => {
    let family = families.get(name);
    if (family === undefined) {
      family = { head: [], samples: [] };
      families.set(name, family);
    }
    return family;
  };
  for (const { worker, body } of bodies) {
    let current: Family | undefined;
    for (const line of body.split('\n')) {
      if (line === '') continue;
      if (line.startsWith('#')) {
        // "# HELP name text" / "# TYPE name type": the family's head, kept from the first worker only.
        const [, kind, name] = line.split(' ', 3);
        if ((kind !== 'HELP' && kind !== 'TYPE') || name === undefined) continue;
        current = familyOf(name);
        if (!current.head.some((l) => l.startsWith(`# ${kind} `))) current.head.push(line);
        continue;
      }
      const labelled = withWorker(line, worker);
      (current ?? familyOf(nameOf(line))).samples.push(labelled);
    }
  }
  let text = '';
  for (const family of families.values()) {
    for (const line of family.head) text += `${line}\n`;
    for (const line of family.samples) text += `${line}\n`;
  }
  return text;
}

function nameOf(sample: string): string {
  const end = sample.search(/[{ ]/);
  return end === -1 ? sample : sample.slice(0, end);
}

/** `name{a="1"} 2` → `name{worker="0",a="1"} 2`; `name 2` → `name{worker="0"} 2`. */
function withWorker(sample: string, worker: number): string {
  const name = nameOf(sample);
  const rest = sample.slice(name.length);
  const label = `worker="${worker}"`;
  if (rest.startsWith('{}')) return `${name}{${label}}${rest.slice(2)}`;
  if (rest.startsWith('{')) return `${name}{${label},${rest.slice(1)}`;
  return `${name}{${label}}${rest}`;
}
