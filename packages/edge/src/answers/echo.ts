// Edge error pages repeat what the client sent (a session name, a Host, a URL) so a user can see what went
// wrong. Echoed values are attacker-controlled: each is quoted, stripped of anything that could act as a
// line break or terminal control, and bounded, so a page is never longer than the edge's own words plus a
// few short values.

/** Longest echoed value, in characters, before it is cut with an ellipsis. */
export const ECHO_LIMIT = 100;

const unprintable = /[\u007f-\u009f\u2028\u2029]/g;

/**
 * `value` as a quoted, escaped string of at most `limit` characters (plus the quotes and escapes):
 * control characters become `\uXXXX`, `"` and `\` are escaped, a longer value ends in `…`.
 */
export function quoteForEcho(value: string, limit = ECHO_LIMIT): string {
  const cut = value.length > limit ? `${value.slice(0, limit)}…` : value;
  // JSON.stringify quotes and escapes C0 controls, `"` and `\`; DEL, C1 and the Unicode line
  // separators are escaped here too.
  return JSON.stringify(cut).replace(
    unprintable,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
