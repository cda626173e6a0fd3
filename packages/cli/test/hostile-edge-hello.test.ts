// An edge's HELLO is as hostile as every other input: the name and URLs it hands the agent are printed on the
// user's terminal (the ready line, the status header), where an escape sequence would be obeyed (OSC 52 sets
// the clipboard, CSI 2J clears the screen) and a newline would forge a line. Played here from the protocol.
import { afterEach, describe, expect, it } from 'vitest';
import { AgentErrorCode, connect } from '../src/index.js';
import { startPlayedEdge } from './support/played-edge.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** An edge that answers every HELLO with `info` as its session info. */
async function playEdge(info: Record<string, unknown>): Promise<string> {
  const played = await startPlayedEdge((_hello, session) => session.sendHello(info, true));
  cleanups.push(() => played.close());
  return played.url;
}

const ESC = String.fromCharCode(27);

describe("an edge's session info with control characters", () => {
  for (const [what, info] of [
    ['the URL', { name: 'app', url: `http://app.example/${ESC}]52;c;ZXZpbA==${String.fromCharCode(7)}` }],
    ['the name', { name: `app${ESC}[2J`, url: 'http://app.example/' }],
    ['a listed URL', { name: 'app', url: 'http://app.example/', urls: ['http://app.example/\ntunnel2: x'] }],
  ] as const) {
    it(`in ${what}: the session is refused as a broken handshake, nothing is announced`, async () => {
      const server = await playEdge(info);
      await expect(connect({ target: 1, server, inspect: false })).rejects.toMatchObject({
        code: AgentErrorCode.HANDSHAKE_FAILED,
      });
    });
  }

  it('a clean one is taken as it is', async () => {
    const server = await playEdge({ name: 'app', url: 'http://app.example/' });
    const tunnel = await connect({ target: 1, server, inspect: false });
    cleanups.push(() => tunnel.close(0));
    expect(tunnel.info).toMatchObject({ name: 'app', url: 'http://app.example/' });
  });
});
