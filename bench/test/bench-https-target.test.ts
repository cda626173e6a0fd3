import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type HttpsBackend,
  makeCertificates,
  startHttpsBackend,
  type TestCertificates,
} from '../../packages/cli/test/support/https-backend.js';
import type { BenchReport } from '../src/plan/report-schema.js';
import { runBench } from './support/run-bench.js';

// A developer's service on https:// with a self-signed certificate (a dev server's `--https`): the load
// generator and the direct side's preflight never check certificates, so the kit's own agent must not
// either, or the tunnel side alone fails; and when the kit's agent cannot reach the target, the preflight
// says that rather than advising --expect-status 502.

const work = mkdtempSync(join(tmpdir(), 'tunnel2-bench-https-'));
const short = ['--stages', '20', '--duration', '0.5', '--warmup', '0', '--inspect', 'off'];
let certs: TestCertificates;
let backend: HttpsBackend;

beforeAll(async () => {
  certs = await makeCertificates();
  backend = await startHttpsBackend(certs.selfSigned);
});

afterAll(async () => {
  await backend.close();
  await certs.dispose();
  rmSync(work, { recursive: true, force: true });
});

describe('an https:// target', () => {
  it('with a self-signed certificate: both sides measured, the report says the agent does not check it', async () => {
    const out = join(work, 'self-signed');
    const target = `https://127.0.0.1:${backend.port}/health`;
    const run = await runBench(['ramp', '--target', target, ...short, '--out', out]);
    expect(run.code, run.stderr).toBe(0);
    const json = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as BenchReport;
    for (const side of [json.stages[0]!.direct!, json.stages[0]!.tunnel!]) {
      expect(side.requests).toBeGreaterThan(0);
      expect(side.ok).toBe(side.requests);
    }
    expect(readFileSync(join(out, 'report.md'), 'utf8')).toContain(
      "the kit's agent runs with --insecure: the target's certificate is not checked, as on the direct side",
    );
  });
});

describe("the kit's agent cannot reach the target", () => {
  it('the preflight says so with the code, and does not advise --expect-status 502', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const run = await runBench([
      'ramp',
      '--target',
      `http://127.0.0.1:${port}/health`,
      '--only',
      'tunnel',
      ...short,
      '--out',
      join(work, 'unreachable'),
    ]);
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(
      new RegExp(
        `bench: GET http://bench\\.localhost:\\d+/health answered 502 on the tunnel side, expected 2xx: ` +
          `the kit's agent could not reach --target http://127\\.0\\.0\\.1:${port}/health ` +
          `\\(TUNNEL2_ERR_BACKEND_UNREACHABLE: tunnel2: backend refused connection on 127\\.0\\.0\\.1:${port}\\)`,
      ),
    );
    expect(run.stderr).not.toContain('--expect-status 502');
  });
});
