// Several tunnels on one session at the wire: hostile agents listing `tunnels` against a real edge, and a
// real agent (connectMany) against a peer written here from @tunnel2/protocol that plays an edge (an old
// one that ignores `tunnels`, or one that sends streams with bad tags).
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildEdge } from '@tunnel2/edge';
import {
  ErrorCode,
  encodeRequestHead,
  encodeTunnelTag,
  type GoAway,
  type Hello,
  MAX_SESSION_TUNNELS,
  MuxSession,
  type MuxStream,
  StreamResetError,
} from '@tunnel2/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { AgentErrorCode, connect, connectMany } from '../src/index.js';
import { startPlayedEdge } from './support/played-edge.js';
import { silent } from './support/stack.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function startEdge() {
  const edge = buildEdge({ port: 0, logger: silent });
  const { url } = await edge.listen();
  cleanups.push(() => edge.close(0));
  return { edge, url };
}

async function backend(body: string): Promise<number> {
  const server: Server = createServer((_req, res) => res.end(body));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return (server.address() as AddressInfo).port;
}

/** What a raw agent saw: the edge's HELLO ACK metadata, or the GOAWAY that closed it first. */
type Outcome = { ack: Record<string, unknown> } | { goAway: GoAway };

/** A raw agent: sends HELLO with `meta` as given (any `tunnels`, any `streamKinds`) and reports the answer. */
async function rawHello(url: string, name: string, meta: Record<string, unknown>): Promise<Outcome> {
  const ws = new WebSocket(`${url.replace('http', 'ws')}/_tunnel2/connect?name=${name}`, {
    perMessageDeflate: false,
  });
  cleanups.push(() => ws.terminate());
  await once(ws, 'open');
  return new Promise<Outcome>((resolve) => {
    const session = new MuxSession({
      role: 'agent',
      settings: { heartbeatIntervalMs: 0 },
      transport: {
        send: (message, done) => ws.send(message, { binary: true }, done),
        close: () => ws.close(),
      },
      handler: {
        onHello: (hello: Hello) => resolve({ ack: hello.meta }),
        onGoAway: (goAway) => resolve({ goAway }),
        onClose: () => {},
      },
    });
    ws.on('message', (data) => session.receive(data as Buffer));
    ws.on('close', () => session.transportClosed());
    session.sendHello({ agent: 'hostile', ...meta }, false);
  });
}

describe('an agent listing tunnels it may not (a real edge)', () => {
  it('tunnels without "tunnel" in streamKinds, or more than 32: PROTOCOL_ERROR; malformed asks: refused one by one; others keep being served', async () => {
    const { edge, url } = await startEdge();
    const noKind = await rawHello(url, 'hostile-a', { tunnels: [{ name: 'hostile-b' }] });
    expect(noKind).toMatchObject({ goAway: { code: ErrorCode.PROTOCOL_ERROR } });
    const notList = await rawHello(url, 'hostile-c', { tunnels: { name: 'x' }, streamKinds: ['tunnel'] });
    expect(notList).toMatchObject({ goAway: { code: ErrorCode.PROTOCOL_ERROR } });
    const many = Array.from({ length: MAX_SESSION_TUNNELS + 1 }, () => ({}));
    const tooMany = await rawHello(url, 'hostile-d', { tunnels: many, streamKinds: ['tunnel'] });
    expect(tooMany).toMatchObject({ goAway: { code: ErrorCode.PROTOCOL_ERROR } });
    if ('goAway' in tooMany) expect(tooMany.goAway.reason).toContain(`at most ${MAX_SESSION_TUNNELS}`);

    const malformed = await rawHello(url, 'hostile-e', {
      streamKinds: ['tunnel'],
      tunnels: [
        42,
        { name: 5 },
        { name: 'Not A Label!' },
        { tcp: 'any' },
        { name: 'hostile-e' },
        { name: 'hostile-f' },
      ],
    });
    expect('ack' in malformed).toBe(true);
    const answers = 'ack' in malformed ? (malformed.ack.tunnels as Record<string, unknown>[]) : [];
    expect(answers.map((a) => (a.error as { code?: string } | undefined)?.code ?? a.name)).toEqual([
      'TUNNEL2_ERR_BAD_REQUEST',
      'TUNNEL2_ERR_BAD_REQUEST',
      'TUNNEL2_ERR_INVALID_NAME',
      'TUNNEL2_ERR_TCP_DISABLED',
      'TUNNEL2_ERR_NAME_IN_USE',
      'hostile-f',
    ]);
    // A refused ask holds nothing: the session holds its own name and the one listed tunnel that won.
    expect(edge.sessions.names).toBe(2);

    const port = await backend('still here');
    const other = await connect({ target: port, server: url, subdomain: 'bystander', inspect: false });
    cleanups.push(() => other.close(0));
    expect(await (await fetch(`${url}/session/bystander/`)).text()).toBe('still here');
  });
});

interface PlayedEdge {
  url: string;
  /** The agent's HELLO metadata. */
  hello: Promise<Record<string, unknown>>;
  /** The live session, once the agent said HELLO. */
  session: Promise<MuxSession>;
}

/**
 * An edge played from @tunnel2/protocol: it answers HELLO with a session name and, with `answerTunnels`,
 * one answer per listed tunnel (else none, as an edge that predates them).
 */
async function playEdge(answerTunnels: boolean): Promise<PlayedEdge> {
  let gotHello: (meta: Record<string, unknown>) => void = () => {};
  let gotSession: (session: MuxSession) => void = () => {};
  const hello = new Promise<Record<string, unknown>>((resolve) => {
    gotHello = resolve;
  });
  const sessionReady = new Promise<MuxSession>((resolve) => {
    gotSession = resolve;
  });
  const played = await startPlayedEdge((h, session) => {
    gotHello(h.meta);
    const asks = Array.isArray(h.meta.tunnels) ? h.meta.tunnels : [];
    const info = (name: string) => ({
      name,
      url: `http://${name}.played/`,
      urls: [`http://${name}.played/`],
    });
    session.sendHello(
      {
        ...info('own'),
        ...(answerTunnels ? { tunnels: asks.map((_, i) => info(`listed${i + 1}`)) } : {}),
      },
      true,
    );
    gotSession(session);
  });
  cleanups.push(() => played.close());
  return { url: played.url, hello, session: sessionReady };
}

/** Opens a stream with `payload` as its first HEADERS; resolves with its reset code, or 'answered'. */
function probe(session: MuxSession, payload: Buffer): Promise<number | 'answered'> {
  return new Promise((resolve) => {
    const stream: MuxStream = session.openStream();
    stream.handler = {
      onHeaders: () => resolve('answered'),
      onData: (chunk) => stream.consume(chunk.length),
      onEnd: () => {},
      onReset: (err) => resolve(err instanceof StreamResetError ? err.protocolCode : -1),
      onDrain: () => {},
    };
    stream.sendHeaders(payload, true);
  });
}

describe('an agent carrying several tunnels, against an edge played from the protocol', () => {
  it('an edge that does not answer `tunnels` (older): the start fails with MULTI_UNSUPPORTED, saying what to do', async () => {
    const played = await playEdge(false);
    const port = await backend('x');
    const started = connectMany({
      server: played.url,
      tunnels: [
        { name: 'web', target: port },
        { name: 'api', target: port },
      ],
    });
    await expect(started).rejects.toMatchObject({
      code: AgentErrorCode.MULTI_UNSUPPORTED,
      fatal: true,
      message: expect.stringContaining(
        'upgrade the edge, or run one `tunnel2 http`/`tunnel2 tcp` per tunnel',
      ),
    });
    expect((await played.hello).streamKinds).toContain('tunnel');
  });

  it('resets with PROTOCOL_ERROR a stream tagged for a tunnel it never listed, index 0, or a cut tag; forwards a good tag', async () => {
    const played = await playEdge(true);
    const web = await backend('web');
    const api = await backend('api');
    const group = await connectMany({
      server: played.url,
      tunnels: [
        { name: 'web', target: web },
        { name: 'api', target: api },
      ],
    });
    cleanups.push(() => group.close(0));
    const session = await played.session;
    const head = encodeRequestHead(
      { method: 'GET', target: '/', headers: ['Host', 'listed1.played'] },
      65_536,
    );
    const tagged = (index: number) => {
      const payload = encodeTunnelTag(1, head);
      payload.writeUInt16BE(index, 2);
      return payload;
    };
    expect(await probe(session, tagged(2))).toBe(ErrorCode.PROTOCOL_ERROR);
    expect(await probe(session, tagged(0))).toBe(ErrorCode.PROTOCOL_ERROR);
    expect(await probe(session, Buffer.from([0, 2, 0]))).toBe(ErrorCode.PROTOCOL_ERROR);
    expect(await probe(session, tagged(1))).toBe('answered');
    expect(await probe(session, head)).toBe('answered');
  });
});
