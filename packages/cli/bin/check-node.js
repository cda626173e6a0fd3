// The Node.js version check, apart from the CLI so that it stays plain JS that any Node since 12 parses and
// runs (no `??`, `?.`, `||=` or top-level await, here or in the bin), and so that it can be unit-tested.

/** The oldest supported Node.js version as [major, minor]; keep in step with `engines.node`. */
export const MINIMUM_NODE = [22, 19];

/**
 * One line naming the required version when `version` ("22.3.0" or "v22.3.0") is older than the supported
 * range or not a version at all; `undefined` when it is supported.
 */
export function checkNodeVersion(version) {
  const text = String(version);
  const match = /^v?(\d+)\.(\d+)(\.|$)/.exec(text);
  const shown = text.charAt(0) === 'v' ? text : `v${text}`;
  const problem = `tunnel2 requires Node.js >= ${MINIMUM_NODE.join('.')} (this is ${shown})`;
  if (!match) return problem;
  const major = Number(match[1]);
  const minor = Number(match[2]);
  if (major > MINIMUM_NODE[0] || (major === MINIMUM_NODE[0] && minor >= MINIMUM_NODE[1])) return undefined;
  return problem;
}
