import { connect as netConnect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { TcpConnectionReport } from '../src/index.js';
import { startSilentTarget } from './support/silent-target.js';
import { until } from './support/stack.js';
import { howItEnds, startTcpStack } from './support/tcp-stack.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function silentStack(connectTimeoutMs: number) {
  const target = await startSilentTarget();
  cleanups.push(target.close);
  const stack = await startTcpStack(target.port, { tunnel: { connectTimeoutMs } });
  cleanups.push(stack.close);
  const reports: TcpConnectionReport[] = [];
  stack.tunnel.on('connection', (r) => reports.push(r));
  return { stack, reports };
}

describe('how a TCP connection that never reached its target is reported', () => {
  it('a target that never answers: the connect gives up, the client is reset, reported unreachable', async () => {
    const { stack, reports } = await silentStack(200);
    const client = netConnect({ port: stack.port, host: '127.0.0.1' });
    expect(await howItEnds(client)).toBe('ECONNRESET');
    await until(() => reports.length === 1);
    expect(reports[0]).toMatchObject({ outcome: 'unreachable', error: 'ETIMEDOUT' });
  });

  it('the public client leaves before the target answered: reported reset, not refused', async () => {
    const { stack, reports } = await silentStack(60_000);
    const client = netConnect({ port: stack.port, host: '127.0.0.1' });
    client.on('error', () => {});
    await until(() => stack.edge.tcp?.counters.connections.accepted === 1);
    client.resetAndDestroy();
    await until(() => reports.length === 1);
    expect(reports[0]).toMatchObject({ outcome: 'reset', error: 'CANCEL' });
  });
});
