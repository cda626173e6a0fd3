import { once } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { silent } from './support/stack.js';

// The agent's gRPC semantics with a server and client nobody here wrote (@grpc/grpc-js): every call kind,
// metadata and `-bin` trailers both ways, cancellation and a deadline that reach the server as a cancel.
// The public side is the edge's h2c port. Trailers-only answers (a status error, the agent's gRPC-form
// errors) are proven frame by frame in e2e-h2-frames.test.ts: end to end they rest on the edge writing a
// final head with END_STREAM as one HEADERS frame. (The full gRPC suite, the TLS port, grpcurl and load are
// grpc-e2e's.)

const raw = { serialize: (b: Buffer) => b, deserialize: (b: Buffer) => b };
const method = (path: string, requestStream: boolean, responseStream: boolean) => ({
  path,
  requestStream,
  responseStream,
  requestSerialize: raw.serialize,
  requestDeserialize: raw.deserialize,
  responseSerialize: raw.serialize,
  responseDeserialize: raw.deserialize,
});
const service = {
  unary: method('/t.Echo/Unary', false, false),
  serverStream: method('/t.Echo/ServerStream', false, true),
  clientStream: method('/t.Echo/ClientStream', true, false),
  bidi: method('/t.Echo/Bidi', true, true),
  hold: method('/t.Echo/Hold', false, false),
} satisfies grpc.ServiceDefinition;

type Calls = Record<keyof typeof service, (...args: never[]) => unknown>;

let server: grpc.Server;
let edge: Edge;
let tunnel: Tunnel;
let client: grpc.Client & Record<string, (...args: unknown[]) => unknown>;
let port: number;
/** One per Hold call the server took: resolves when grpc-js reports that call cancelled. */
const held: Promise<void>[] = [];

/** The next Hold call, once the server has taken it (wrapped: a promise's promise would be flattened). */
async function nextHeld(): Promise<{ cancelled: Promise<void> }> {
  const index = held.length;
  while (held.length <= index) await new Promise((resolve) => setImmediate(resolve));
  return { cancelled: held[index]! };
}

const handlers = {
  unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, done: grpc.sendUnaryData<Buffer>) => {
    const seen = call.metadata.get('x-in-bin')[0];
    const trailer = new grpc.Metadata();
    trailer.set('x-out-bin', Buffer.from([0, 1, 2, 255]));
    trailer.set('x-seen-in', Buffer.isBuffer(seen) ? seen.toString('hex') : 'none');
    done(null, Buffer.concat([Buffer.from('echo:'), call.request]), trailer);
  },
  serverStream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
    const count = call.request.readUInt8(0);
    for (let i = 0; i < count; i++) call.write(Buffer.from([i]));
    call.end();
  },
  clientStream: (call: grpc.ServerReadableStream<Buffer, Buffer>, done: grpc.sendUnaryData<Buffer>) => {
    let total = 0;
    call.on('data', (b: Buffer) => {
      total += b.length;
    });
    call.on('end', () => done(null, Buffer.from(String(total))));
  },
  bidi: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
    call.on('data', (b: Buffer) => call.write(Buffer.concat([b, b])));
    call.on('end', () => call.end());
  },
  hold: (call: grpc.ServerUnaryCall<Buffer, Buffer>) => {
    held.push(once(call, 'cancelled').then(() => undefined));
  },
} satisfies Calls;

beforeAll(async () => {
  server = new grpc.Server();
  server.addService(service, handlers as unknown as grpc.UntypedServiceImplementation);
  const backendPort = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  edge = buildEdge({ port: 0, logger: silent });
  ({ port } = await edge.listen());
  tunnel = await connect({ target: backendPort, server: edge.url, subdomain: 'grpc', h2c: true });
  const Client = grpc.makeGenericClientConstructor(service, 'Echo');
  client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    'grpc.default_authority': `grpc.localhost:${port}`,
  }) as typeof client;
});
afterAll(async () => {
  client.close();
  await tunnel.close(0);
  await edge.close(0);
  server.forceShutdown();
});

function unary(
  name: string,
  request: Buffer,
  options: { metadata?: grpc.Metadata; deadline?: number } = {},
): Promise<{ error: grpc.ServiceError | null; value?: Buffer; trailers?: grpc.Metadata }> {
  return new Promise((resolve) => {
    let outcome: { error: grpc.ServiceError | null; value?: Buffer } | undefined;
    let trailers: grpc.Metadata | undefined;
    // The callback and the 'status' event come in either order: settled once both are in.
    const settle = (): void => {
      if (outcome !== undefined && trailers !== undefined) resolve({ ...outcome, trailers });
    };
    const call = client[name]!(
      request,
      options.metadata ?? new grpc.Metadata(),
      options.deadline === undefined ? {} : { deadline: Date.now() + options.deadline },
      (error: grpc.ServiceError | null, value?: Buffer) => {
        outcome = { error, value };
        settle();
      },
    ) as grpc.ClientUnaryCall;
    call.on('status', (status: grpc.StatusObject) => {
      trailers = status.metadata;
      settle();
    });
  });
}

describe('grpc-js through edge (h2c) and agent (--h2c)', () => {
  it('unary, with -bin metadata in and -bin trailers out', async () => {
    const metadata = new grpc.Metadata();
    metadata.set('x-in-bin', Buffer.from([9, 8, 7]));
    const { error, value, trailers } = await unary('unary', Buffer.from('hi'), { metadata });
    expect(error).toBeNull();
    expect(value?.toString()).toBe('echo:hi');
    expect(trailers?.get('x-out-bin')[0]).toEqual(Buffer.from([0, 1, 2, 255]));
    expect(trailers?.get('x-seen-in')[0]).toBe('090807');
  });

  it('server streaming', async () => {
    const call = client.serverStream!(Buffer.from([50])) as grpc.ClientReadableStream<Buffer>;
    const got: number[] = [];
    for await (const b of call) got.push((b as Buffer)[0]!);
    expect(got).toEqual(Array.from({ length: 50 }, (_, i) => i));
  });

  it('client streaming', async () => {
    const result = new Promise<string>((resolve, reject) => {
      const call = client.clientStream!((err: grpc.ServiceError | null, v?: Buffer) =>
        err ? reject(err) : resolve(String(v)),
      ) as grpc.ClientWritableStream<Buffer>;
      for (let i = 0; i < 20; i++) call.write(Buffer.alloc(1000, i));
      call.end();
    });
    expect(await result).toBe('20000');
  });

  it('bidirectional: each reply comes back before the next message is sent', async () => {
    const call = client.bidi!() as grpc.ClientDuplexStream<Buffer, Buffer>;
    for (const word of ['a', 'bc', 'def']) {
      call.write(Buffer.from(word));
      const [reply] = (await once(call, 'data')) as [Buffer];
      expect(reply.toString()).toBe(word + word);
    }
    call.end();
    await once(call, 'end');
  });

  it('a cancelled call is cancelled on the server', async () => {
    const taken = nextHeld();
    const call = client.hold!(Buffer.alloc(0), () => {}) as grpc.ClientUnaryCall;
    const { cancelled } = await taken;
    call.cancel();
    await cancelled;
  });

  it('a deadline: the client gets DEADLINE_EXCEEDED and the server sees the call cancelled', async () => {
    const taken = nextHeld();
    const { error } = await unary('hold', Buffer.alloc(0), { deadline: 300 });
    expect(error?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    await await taken;
  });
});
