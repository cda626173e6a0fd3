// The agent's idle memory, from the compiled workspace and from the published bundle alternated (issue #34,
// target 4): an edge, then `tunnel2 http` with its stdout a file (so on the main thread, as on a terminal),
// and the agent's VmRSS, RssAnon and RssFile read from /proc 5 s after it printed `ready`. The target is a
// closed port: idle means no request.
//   node bench/scripts/agent-idle-rss.ts [runs=3] [--wss] [--pipe]
// Build first (`pnpm exec tsc -b`, then `node scripts/pack-cli.ts --no-build` for packages/cli/publish/).
// --wss: the edge serves TLS (a self-signed certificate made with openssl, trusted by the agents through
// NODE_EXTRA_CA_CERTS), so the agents load node:tls as a real user's agent on a wss:// edge does.
// AGENT_IDLE_BUILDS=name=bin,name=bin measures these tunnel2.js instead (e.g. an older build beside this one,
// alternated in the same run).
// --pipe: the agent's stdout is a pipe this script reads (a `--json` consumer), and each build runs twice: as
// it chooses for a piped stdout, and with TUNNEL2_WORKER=1 (the tunnel in a worker thread, the default for a
// piped stdout before the agent ran on the main thread whatever stdout is).
// AGENT_NODE_FLAGS adds Node flags to the agent (e.g. `--no-turbofan`, to see what the optimizing compiler's
// code pages cost).
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, open, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const runs = Number(process.argv.find((arg) => /^\d+$/.test(arg)) ?? 3);
const wss = process.argv.includes('--wss');
const pipe = process.argv.includes('--pipe');
const flags = (process.env.AGENT_NODE_FLAGS ?? '').split(' ').filter((flag) => flag !== '');
const workspaceBin = fileURLToPath(new URL('../../packages/cli/bin/tunnel2.js', import.meta.url));
const builds: Record<string, string> = process.env.AGENT_IDLE_BUILDS
  ? Object.fromEntries(process.env.AGENT_IDLE_BUILDS.split(',').map((pair) => pair.split('=', 2)))
  : {
      workspace: workspaceBin,
      bundle: fileURLToPath(new URL('../../packages/cli/publish/bin/tunnel2.js', import.meta.url)),
    };

/** VmRSS, RssAnon and RssFile of a process in KiB. */
async function rssOf(pid: number): Promise<Record<string, number>> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const field = (name: string): number =>
    Number(new RegExp(`${name}:\\s+(\\d+)`).exec(status)?.[1] ?? Number.NaN);
  return { rss: field('VmRSS'), anon: field('RssAnon'), file: field('RssFile') };
}

async function stopped(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  await exited;
}

const dir = await mkdtemp(join(tmpdir(), 'tunnel2-idle-rss-'));
const tls: string[] = [];
const agentEnv: NodeJS.ProcessEnv = { ...process.env, TUNNEL2_WORKER: pipe ? '' : '0' };
if (wss) {
  const [cert, key] = [join(dir, 'edge.crt'), join(dir, 'edge.key')];
  await promisify(execFile)('openssl', [
    ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'],
    ...['-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=localhost'],
    ...['-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'],
  ]);
  tls.push('--tls-cert', cert, '--tls-key', key);
  agentEnv.NODE_EXTRA_CA_CERTS = cert;
}
const edge = spawn(
  process.execPath,
  [workspaceBin, 'server', '--port', '0', ...tls, '--json', '--log-level', 'warn'],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
let edgeOut = '';
edge.stdout?.setEncoding('utf8');
while (!edgeOut.includes('"listening"')) edgeOut += (await once(edge.stdout ?? edge, 'data'))[0];
const edgeUrl = String((JSON.parse(edgeOut.split('\n')[0] ?? '{}') as { url?: string }).url);
const mib = (kib: number | undefined): string => ((kib ?? 0) / 1024).toFixed(1);
/** Each build, and under --pipe each build again in a worker: [label, bin, TUNNEL2_WORKER]. */
const variants: [string, string, string][] = Object.entries(builds).flatMap(([name, bin]) =>
  pipe
    ? [
        [name, bin, ''],
        [`${name}+worker`, bin, '1'],
      ]
    : [[name, bin, '0']],
);
try {
  for (let run = 1; run <= runs; run++) {
    for (const [name, bin, worker] of variants) {
      const outPath = join(dir, `${name}-${run}.out`);
      const out = pipe ? undefined : await open(outPath, 'w');
      const agent = spawn(process.execPath, [...flags, bin, 'http', '9', '--server', edgeUrl, '--json'], {
        stdio: ['ignore', out === undefined ? 'pipe' : out.fd, 'inherit'],
        env: { ...agentEnv, TUNNEL2_WORKER: worker },
      });
      if (agent.stdout !== null) {
        // Read as a consumer reads, to the end.
        let text = '';
        agent.stdout.setEncoding('utf8');
        while (!text.includes('"ready"')) text += (await once(agent.stdout, 'data'))[0];
        agent.stdout.resume();
      } else {
        // Polled: the agent writes to a file, which gives no event to wait for.
        while (!(await readFile(outPath, 'utf8')).includes('"ready"')) await sleep(50);
      }
      await sleep(5000);
      const rss = await rssOf(agent.pid ?? 0);
      await stopped(agent);
      await out?.close();
      console.log(
        `run ${run} ${name.padEnd(23)} VmRSS ${mib(rss.rss)} MiB (${((rss.rss ?? 0) * 1.024e-3).toFixed(1)} MB)` +
          `  RssAnon ${mib(rss.anon)}  RssFile ${mib(rss.file)} MiB`,
      );
    }
  }
} finally {
  await stopped(edge);
  await rm(dir, { recursive: true, force: true });
}
