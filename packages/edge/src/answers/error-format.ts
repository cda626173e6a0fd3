/**
 * Which form an error answer takes for a client, from its Accept header (RFC 9110 §12.5.1): a page for a
 * browser, JSON for a client that asks for it, and the plain text line curl and scripts have always had
 * for anything else. Pure, no I/O: the edge and the agent (which renders its backend errors) both use it.
 */
export type ErrorFormat = 'text' | 'html' | 'json';

/** Media ranges read from one Accept header at most: a header is bounded by the server, this by us. */
const MAX_RANGES = 64;

interface MediaRange {
  type: string;
  subtype: string;
  q: number;
}

function parseRange(part: string): MediaRange | undefined {
  const [media = '', ...params] = part.split(';');
  const slash = media.indexOf('/');
  if (slash <= 0) return undefined;
  const type = media.slice(0, slash).trim().toLowerCase();
  const subtype = media
    .slice(slash + 1)
    .trim()
    .toLowerCase();
  if (type === '' || subtype === '' || (type === '*' && subtype !== '*')) return undefined;
  let q = 1;
  for (const param of params) {
    const eq = param.indexOf('=');
    if (eq < 0 || param.slice(0, eq).trim().toLowerCase() !== 'q') continue;
    const value = Number(param.slice(eq + 1).trim());
    // A weight that is not a number in 0..1 is not one the client meant: the range is ignored.
    q = Number.isFinite(value) && value >= 0 && value <= 1 ? value : 0;
    break;
  }
  return { type, subtype, q };
}

/**
 * The weight `ranges` give `type/subtype` by its most specific matching range (exact, then a subtype
 * wildcard, then the full wildcard), and whether it was named exactly.
 */
function weightOf(
  ranges: readonly MediaRange[],
  type: string,
  subtype: string,
): { q: number; exact: boolean } {
  let best: { q: number; specificity: number } | undefined;
  for (const range of ranges) {
    let specificity: number;
    if (range.type === type && range.subtype === subtype) specificity = 2;
    else if (range.type === type && range.subtype === '*') specificity = 1;
    else if (range.type === '*') specificity = 0;
    else continue;
    if (best === undefined || specificity > best.specificity) best = { q: range.q, specificity };
  }
  return { q: best?.q ?? 0, exact: best?.specificity === 2 };
}

/**
 * The error form `accept` asks for. HTML or JSON only when named exactly (the full wildcard alone, what
 * curl and fetch send, keeps the plain text) and weighted strictly above text/plain; between the two, the higher
 * weight, then the one listed first. No header, an empty or unreadable one: plain text.
 */
export function negotiateErrorFormat(accept: string | undefined): ErrorFormat {
  if (accept === undefined || accept === '') return 'text';
  const ranges: MediaRange[] = [];
  for (const part of accept.split(',', MAX_RANGES)) {
    const range = parseRange(part);
    if (range !== undefined) ranges.push(range);
  }
  const text = weightOf(ranges, 'text', 'plain').q;
  const html = weightOf(ranges, 'text', 'html');
  const json = weightOf(ranges, 'application', 'json');
  const htmlWins = html.exact && html.q > 0 && html.q > text;
  const jsonWins = json.exact && json.q > 0 && json.q > text;
  if (htmlWins && jsonWins) {
    if (html.q !== json.q) return html.q > json.q ? 'html' : 'json';
    return firstNamed(ranges) ?? 'html';
  }
  if (htmlWins) return 'html';
  if (jsonWins) return 'json';
  return 'text';
}

function firstNamed(ranges: readonly MediaRange[]): ErrorFormat | undefined {
  for (const { type, subtype } of ranges) {
    if (type === 'text' && subtype === 'html') return 'html';
    if (type === 'application' && subtype === 'json') return 'json';
  }
  return undefined;
}
