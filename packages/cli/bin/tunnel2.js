#!/usr/bin/env node
// A plain-JS entry so an unsupported Node fails with one clear line instead of a syntax or import error: this
// file and check-node.js use only syntax that old Node versions parse (no top-level await, `||=`, `??`).
import { checkNodeVersion } from './check-node.js';

const problem = checkNodeVersion(process.versions.node);
if (problem !== undefined) {
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}

const main = new URL('../dist/main.js', import.meta.url);
if (process.env.TUNNEL2_IN_PROCESS === '1') {
  import(main.href);
} else {
  // The tunnel runs in a worker with a small young generation: buffers that a proxy churns through at
  // line rate are then freed by frequent cheap scavenges instead of piling up until a full GC, which keeps
  // RSS flat (about 40 MB lower at 400 MB/s) and is faster too. Node flags cannot be set from inside a
  // running process, and re-executing would orphan the child on SIGKILL; a worker has neither problem.
  // TUNNEL2_YOUNG_GENERATION_MB trades memory for CPU (a larger young generation scavenges less often).
  const youngMb = Number(process.env.TUNNEL2_YOUNG_GENERATION_MB || 3);
  if (!(youngMb >= 1 && youngMb <= 256)) {
    process.stderr.write('tunnel2: TUNNEL2_YOUNG_GENERATION_MB must be a number of MB in [1, 256]\n');
    process.exit(1);
  }
  import('node:worker_threads').then(({ Worker }) => {
    const worker = new Worker(main, {
      argv: process.argv.slice(2),
      resourceLimits: { maxYoungGenerationSizeMb: youngMb },
    });
    for (const signal of ['SIGINT', 'SIGTERM']) {
      process.on(signal, () => worker.postMessage({ type: 'signal', signal }));
    }
    worker.on('error', (err) => {
      process.stderr.write(`tunnel2: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    });
    worker.on('exit', (code) => {
      if (!process.exitCode) process.exitCode = code;
    });
  });
}
