import { parseArgs } from 'node:util';

type ArgOptions = NonNullable<NonNullable<Parameters<typeof parseArgs>[0]>['options']>;

/**
 * What is wrong with a command line the strict parser refused, in one line: `unknown option --prot (did
 * you mean --port?)`, `option --port needs a value`, `unexpected argument "8080"`. Read from the parser's
 * tokens (node:util's own messages are several lines long and say `'-p, --port <value>'`), never from its
 * message text.
 */
export function usageProblem(argv: string[], options: ArgOptions): string | undefined {
  const { tokens } = parseArgs({
    args: argv,
    options,
    strict: false,
    allowPositionals: true,
    allowNegative: true,
    tokens: true,
  });
  const known = Object.keys(options);
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (token.kind === 'positional') return `unexpected argument ${JSON.stringify(token.value)}`;
    if (token.kind !== 'option') continue;
    const option = options[token.name];
    if (option === undefined) {
      const guess = closest(token.name, known);
      return `unknown option ${token.rawName}${guess === undefined ? '' : ` (did you mean --${guess}?)`}`;
    }
    if (option.type === 'boolean' && token.inlineValue === true) {
      return `option --${token.name} takes no value (--${token.name}, or --no-${token.name})`;
    }
    if (option.type === 'string') {
      // `--port --host x`: the next flag is not the value the user forgot.
      const value = token.value;
      if (value === undefined || (token.inlineValue !== true && value.startsWith('-') && value.length > 1)) {
        return `option ${token.rawName} needs a value`;
      }
    }
  }
  return undefined;
}

/** The known name nearest to a mistyped one (two edits at most), or a known name it is the start of. */
function closest(name: string, known: string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of known) {
    const distance = editDistance(name, candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  if (best !== undefined) return best;
  const started = known.filter((candidate) => name.length >= 3 && candidate.startsWith(name));
  return started.length === 1 ? started[0] : undefined;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
    }
    previous = current;
  }
  return previous[b.length]!;
}
