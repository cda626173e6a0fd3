import { readFile } from 'node:fs/promises';
import { buildEdge } from '@tunnel2/edge';
import { afterEach, describe, expect, it } from 'vitest';
import { ptyCli } from './support/pty-cli.js';
import { silent } from './support/stack.js';

// Issue "The everyday loop, polished", 10: a sample in the docs showed output the CLI no longer printed.

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The first fenced block of a doc: the command after `$ `, and the lines it shows. */
async function firstSample(doc: string): Promise<{ args: string[]; lines: string[] }> {
  const text = await readFile(new URL(`../../../docs/${doc}`, import.meta.url), 'utf8');
  const block = text.split('```')[1] ?? '';
  const [command = '', ...lines] = block.replace(/^\n/, '').trimEnd().split('\n');
  const [bin, ...args] = command.replace(/^\$ /, '').split(' ');
  expect(bin).toBe('tunnel2');
  return { args, lines };
}

describe('samples of CLI output in the docs', () => {
  it("docs/inspector.md: the terminal's header for tunnel2 http 3000, as the CLI draws it", async () => {
    const { args, lines } = await firstSample('inspector.md');
    const edge = buildEdge({ port: 0, logger: silent, publicUrl: 'https://example.com' });
    const { url } = await edge.listen();
    cleanups.push(() => edge.close(0));
    // As wide as the sample's rule; the edge as the sample says (TUNNEL2_SERVER).
    const agent = ptyCli(args, { columns: [...(lines.at(-1) ?? '')].length, env: { TUNNEL2_SERVER: url } });
    cleanups.push(() => agent.kill());
    const screen = await agent.waitForScreen((l) => /rtt \d/.test(l[0] ?? ''), 'a round trip');
    // What differs from run to run: the round trip, and the inspector's port when 4040 is taken.
    const shown = screen
      .slice(0, lines.length)
      .map((line) =>
        line.replace(/rtt \d+(\.\d)? ms/, 'rtt 12 ms').replace(/127\.0\.0\.1:40\d\d/, '127.0.0.1:4040'),
      );
    expect(shown).toEqual(lines);
    agent.ctrlC();
    expect(await agent.exited).toBe(0);
  });
});
