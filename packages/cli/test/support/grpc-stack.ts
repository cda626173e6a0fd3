import { type ChannelOptions, credentials } from '@grpc/grpc-js';
import { type GrpcTestServer, startGrpcTestServer, TestServiceClient } from '@tunnel2/test-backend/grpc';
import { makeTestCa } from '@tunnel2/test-services';
import { type Spawned, spawnCli } from './processes.js';

/** How public clients reach the edge: h2c with prior knowledge on the plain port, or TLS with ALPN h2. */
export type Transport = 'h2c' | 'tls';

/** The edge's certificate files for `tunnel2 server --tls-cert --tls-key`, and the CA clients trust. */
export interface EdgeCertificates {
  ca: { cert: string; file: string };
  certFile: string;
  keyFile: string;
  dispose(): Promise<void>;
}

/**
 * A test CA and the edge's certificate it signs, for localhost, 127.0.0.1 and the tunnel names clients
 * check the certificate against by name (grpcurl takes the TLS name from -authority).
 */
export async function makeEdgeCertificates(names: readonly string[] = []): Promise<EdgeCertificates> {
  const ca = await makeTestCa();
  const issued = await ca.issue('edge', ['localhost', '127.0.0.1', ...names.map((n) => `${n}.localhost`)]);
  return { ca: ca.ca, certFile: issued.certFile, keyFile: issued.keyFile, dispose: () => ca.dispose() };
}

/**
 * `tunnel2 server` in its own process (its memory is its own to sample), plain or serving TLS with the test
 * certificate; resolves once it listens, with its public URL (http:// or https://) and port.
 */
export async function startEdge(
  tls: EdgeCertificates | undefined,
): Promise<{ edge: Spawned; url: string; port: number }> {
  const args = ['server', '--port', '0', '--json', '--log-level', 'warn'];
  if (tls !== undefined) args.push('--tls-cert', tls.certFile, '--tls-key', tls.keyFile);
  const edge = spawnCli(args);
  try {
    const url = String((await edge.waitFor('listening')).url);
    return { edge, url, port: Number(new URL(url).port) };
  } catch (err) {
    edge.kill('SIGKILL');
    throw err;
  }
}

/**
 * `tunnel2 http <target> [--h2c] [args]` in its own process, connected to `url` as `name`; it trusts the test CA
 * for a wss:// edge (NODE_EXTRA_CA_CERTS, read at start, as every Node program does).
 */
export async function startAgent(
  target: number,
  url: string,
  name: string,
  options: { h2c?: boolean; ca?: string; args?: string[] } = {},
): Promise<Spawned> {
  const args = ['http', String(target), '--server', url, '--subdomain', name, '--json', '--no-inspect'];
  if (options.h2c !== false) args.push('--h2c');
  args.push(...(options.args ?? []));
  const agent = spawnCli(args, options.ca === undefined ? {} : { NODE_EXTRA_CA_CERTS: options.ca });
  try {
    await agent.waitFor('ready');
    return agent;
  } catch (err) {
    agent.kill('SIGKILL');
    throw err;
  }
}

/** Stops a process the stack started and waits for its exit (SIGKILL if SIGTERM is not enough in 5 s). */
export async function stop(process: Spawned): Promise<void> {
  process.kill('SIGTERM');
  const timer = setTimeout(() => process.kill('SIGKILL'), 5_000);
  await process.exited;
  clearTimeout(timer);
}

/** A gRPC service exposed through a real edge and a real agent, over one transport. */
export interface GrpcStack {
  transport: Transport;
  server: GrpcTestServer;
  edge: Spawned;
  agent: Spawned;
  /** The edge's public port. */
  port: number;
  /** The edge's URL (agents connect to it). */
  url: string;
  /** PEM of the CA the TLS edge's certificate is signed by (TLS only). */
  ca: string | undefined;
  /** `:authority` that routes to the tunnel named `name`. */
  authority(name?: string): string;
  /** A grpc-js client of the test service through the tunnel `name` (closed with the stack). */
  client(options?: ChannelOptions, name?: string): TestServiceClient;
  close(): Promise<void>;
}

export const GRPC_TUNNEL = 'grpc';

/** Starts the gRPC test service (h2c), an edge (plain, or TLS) and an agent with `--h2c` for it. */
export async function startGrpcStack(transport: Transport, tls?: EdgeCertificates): Promise<GrpcStack> {
  if (transport === 'tls' && tls === undefined) throw new Error('a TLS stack needs the edge certificates');
  const edgeTls = transport === 'tls' ? tls : undefined;
  const server = await startGrpcTestServer();
  const { edge, url, port } = await startEdge(edgeTls);
  const agent = await startAgent(server.port, url, GRPC_TUNNEL, { ca: edgeTls?.ca.file });
  const clients: TestServiceClient[] = [];
  const authority = (name = GRPC_TUNNEL): string => `${name}.localhost:${port}`;
  return {
    transport,
    server,
    edge,
    agent,
    port,
    url,
    ca: edgeTls?.ca.cert,
    authority,
    client(options = {}, name = GRPC_TUNNEL) {
      const channel: ChannelOptions = { 'grpc.default_authority': authority(name), ...options };
      // The certificate names localhost: the TLS name is checked against it, the tunnel is chosen by :authority.
      const client =
        edgeTls === undefined
          ? new TestServiceClient(`127.0.0.1:${port}`, credentials.createInsecure(), channel)
          : new TestServiceClient(`127.0.0.1:${port}`, credentials.createSsl(Buffer.from(edgeTls.ca.cert)), {
              'grpc.ssl_target_name_override': 'localhost',
              ...channel,
            });
      clients.push(client);
      return client;
    },
    async close() {
      for (const client of clients.splice(0)) client.close();
      await stop(agent);
      await stop(edge);
      await server.close();
    },
  };
}
