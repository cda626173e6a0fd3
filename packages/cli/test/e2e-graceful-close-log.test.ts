import { Writable } from 'node:stream';
import { buildEdge } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { connect } from '../src/index.js';
import { crashedAgent } from './support/crashed-agent.js';
import { until } from './support/stack.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** An edge whose log lines (info and above) are kept as parsed objects. */
async function loggedEdge() {
  const lines: { level: number; msg: string; graceful?: boolean; err?: { message: string } }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line !== '') lines.push(JSON.parse(line));
      done();
    },
  });
  const edge = buildEdge({ port: 0, logger: pino({ level: 'info' }, sink) });
  await edge.listen();
  cleanups.push(() => edge.close(0));
  return { edge, lines };
}

describe("an agent's graceful close, seen in the edge's log", () => {
  it('is one info line, never a warning, even when the edge stops right after (it was "agent session ended: WebSocket is not open")', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    // As `pnpm demo` stops: the agent closes, then the edge drains at once, writing to the socket whose close
    // frame it has just read.
    for (let run = 0; run < 3; run++) {
      const { edge, lines } = await loggedEdge();
      const tunnel = await connect({ target: backend.port, server: edge.url, subdomain: `bye${run}` });
      const res = await fetch(`${edge.url}/session/bye${run}/loadtest/get`);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      await tunnel.close();
      await edge.close(1000);
      await until(() => lines.some((line) => line.msg === 'agent closed' || line.level >= 40));
      expect(lines.filter((line) => line.level >= 40)).toEqual([]);
      expect(lines.find((line) => line.msg === 'agent closed')?.graceful).toBe(true);
    }
  });

  it('a lost agent is logged as disconnected, not closed', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const { edge, lines } = await loggedEdge();
    await crashedAgent({ server: edge.url, target: backend.port, subdomain: 'lost' });
    await until(() => lines.some((line) => line.msg === 'agent disconnected'));
    expect(lines.find((line) => line.msg === 'agent disconnected')?.graceful).toBe(false);
  });
});
