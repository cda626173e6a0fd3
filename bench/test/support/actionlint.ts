import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';

/** The version .ci/run and ci.yml install. */
export const ACTIONLINT_VERSION = 'v1.7.12';
const INSTALL = `go install github.com/rhysd/actionlint/cmd/actionlint@${ACTIONLINT_VERSION}`;

/** What the actionlint tests do: lint with this binary, or fail saying how to install it. */
export type ActionlintPlan = { lint: string } | { fail: string };

/**
 * Where actionlint is, in order: ACTIONLINT, PATH, Go's bin folder, and the cache .ci/run builds it into
 * (.ci/run always provides it, fetching Go itself if need be). Missing, the tests fail with the install
 * command: a lint that did not run must not read as a pass.
 */
export function planActionlint(
  env: NodeJS.ProcessEnv,
  exists: (file: string) => boolean = existsSync,
): ActionlintPlan {
  const home = env.HOME ?? homedir();
  const candidates = [
    env.ACTIONLINT,
    ...(env.PATH ?? '').split(delimiter).map((dir) => join(dir, 'actionlint')),
    join(env.GOPATH ?? join(home, 'go'), 'bin', 'actionlint'),
    join(
      env.XDG_CACHE_HOME ?? join(home, '.cache'),
      'tunnel2-ci',
      `actionlint-${ACTIONLINT_VERSION}`,
      'actionlint',
    ),
  ];
  const found = candidates.find((file): file is string => file !== undefined && file !== '' && exists(file));
  if (found !== undefined) return { lint: found };
  if (env.ACTIONLINT !== undefined && env.ACTIONLINT !== '') {
    return { fail: `ACTIONLINT=${env.ACTIONLINT} does not exist (${INSTALL})` };
  }
  return { fail: `actionlint not found: install it with ${INSTALL} (or run bash .ci/run, which builds it)` };
}
