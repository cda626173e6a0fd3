import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

// Whatever a test file runs (the CLI in-process, or a process it spawns itself) finds its config directory
// here, never in the real ~/.config: a token-less CLI writes its agent key there
// (packages/cli/src/config/agent-key.ts). The support spawners give each process its own directory besides (packages/cli/test/support/config-home.ts).
const dir = mkdtempSync(join(tmpdir(), 'tunnel2-test-config-'));
process.env.XDG_CONFIG_HOME = dir;
afterAll(() => rmSync(dir, { recursive: true, force: true }));
