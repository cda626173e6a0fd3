import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';

/** The version .ci/run and ci.yml build (the newest whose go.mod the CI's Go toolchain satisfies). */
export const GRPCURL_VERSION = 'v1.9.3';
const INSTALL = `go install github.com/fullstorydev/grpcurl/cmd/grpcurl@${GRPCURL_VERSION}`;

/**
 * Where grpcurl is, in order: GRPCURL, PATH, Go's bin folder, and the cache .ci/run builds it into. Missing,
 * this throws the install command: the test fails rather than skips, so a call that did not run never reads
 * as a pass (.ci/run always provides it).
 */
export function findGrpcurl(env: NodeJS.ProcessEnv = process.env, exists = existsSync): string {
  const home = env.HOME ?? homedir();
  const candidates = [
    env.GRPCURL,
    ...(env.PATH ?? '').split(delimiter).map((dir) => join(dir, 'grpcurl')),
    join(env.GOPATH ?? join(home, 'go'), 'bin', 'grpcurl'),
    join(env.XDG_CACHE_HOME ?? join(home, '.cache'), 'tunnel2-ci', `grpcurl-${GRPCURL_VERSION}`, 'grpcurl'),
  ];
  const found = candidates.find((file): file is string => file !== undefined && file !== '' && exists(file));
  if (found !== undefined) return found;
  if (env.GRPCURL !== undefined && env.GRPCURL !== '') {
    throw new Error(`GRPCURL=${env.GRPCURL} does not exist (${INSTALL})`);
  }
  throw new Error(`grpcurl not found: install it with ${INSTALL} (or run bash .ci/run, which builds it)`);
}
