import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';

/** The version .ci/run and ci.yml install. */
export const ACTIONLINT_VERSION = 'v1.7.12';
const INSTALL = `go install github.com/rhysd/actionlint/cmd/actionlint@${ACTIONLINT_VERSION}`;

/** What the actionlint tests do: lint with this binary, skip with a reason, or fail with how to install it. */
export type ActionlintPlan = { lint: string } | { skip: string } | { fail: string };

/**
 * Where actionlint is, in order: ACTIONLINT, PATH, Go's bin folder, and the cache .ci/run builds it into.
 * Its absence follows .ci/run's rule ("a lint error fails CI; a machine that cannot build it only warns"):
 * - ACTIONLINT=none: .ci/run could not build it and has already warned: skip;
 * - CI set: the workflow was meant to install it (ci.yml does): fail, saying how;
 * - a developer's machine: skip with the install command, never a silent pass.
 */
export function planActionlint(
  env: NodeJS.ProcessEnv,
  exists: (file: string) => boolean = existsSync,
): ActionlintPlan {
  if (env.ACTIONLINT === 'none') return { skip: '.ci/run could not build actionlint (see its warning)' };
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
  if (env.CI !== undefined && env.CI !== '' && env.CI !== 'false') {
    return { fail: `actionlint not found and CI is set: install it with ${INSTALL} and set ACTIONLINT` };
  }
  return { skip: `actionlint not found: ${INSTALL}` };
}
