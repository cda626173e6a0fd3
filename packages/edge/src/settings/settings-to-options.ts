import type { AgentAuthOptions } from '../agents/agent-auth.js';
import { EdgeError, EdgeErrorCode } from '../errors.js';
import type { EdgeSettings } from './edge-config.js';
import type { EdgeOptions, EdgeTlsOptions } from './edge-options.js';

/** Edge options from settings; `tokens` already includes the token file's lines. */
export function toEdgeOptions(settings: EdgeSettings, tokens: string[]): EdgeOptions {
  const auth: AgentAuthOptions = { tokens };
  if (settings.tokenSecret !== undefined) auth.tokenSecret = settings.tokenSecret;
  if (settings.allowAnonymous !== undefined) auth.allowAnonymous = settings.allowAnonymous;
  const options: EdgeOptions = {
    port: settings.port,
    host: settings.host,
    domain: settings.domain,
    agentPath: settings.agentPath,
    responseTimeoutMs: settings.responseTimeoutMs,
    leaseTtlMs: settings.leaseTtlMs,
    reconnectGraceMs: settings.reconnectGraceMs,
    maxMessageSize: settings.maxMessageSize,
    maxStreamWindow: settings.maxStreamWindow,
    sessionWindowBudget: settings.sessionWindowBudget,
    edgeWindowBudget: settings.edgeWindowBudget,
    helloTimeoutMs: settings.helloTimeoutMs,
    maxSessionsPerOwner: settings.maxSessionsPerOwner,
    maxRequestBodyBytes: settings.maxRequestBodyBytes,
    maxHeaderBytes: settings.maxHeaderBytes,
    maxStreamsPerSession: settings.maxStreamsPerSession,
    streamWaitMs: settings.streamWaitMs,
    maxWaitingPerSession: settings.maxWaitingPerSession,
    sessionRequestRate: settings.sessionRequestRate,
    reconnectWaitMs: settings.reconnectWaitMs,
    startupGraceMs: settings.startupGraceMs,
    probeTimeoutMs: settings.probeTimeoutMs,
    headersTimeoutMs: settings.headersTimeoutMs,
    requestTimeoutMs: settings.requestTimeoutMs,
    keepAliveTimeoutMs: settings.keepAliveTimeoutMs,
    idleTimeoutMs: settings.idleTimeoutMs,
    maxConnectionsPerAddress: settings.maxConnectionsPerAddress,
    trustProxy: settings.trustProxy,
    showSessionCount: settings.showSessionCount,
    maxTcpPortsPerOwner: settings.maxTcpPortsPerOwner,
    auth,
    protocol: {
      maxConcurrentStreams: settings.maxConcurrentStreams,
      maxFrameSize: settings.maxFrameSize,
      initialStreamWindow: settings.initialStreamWindow,
      initialSessionWindow: settings.initialSessionWindow,
      heartbeatIntervalMs: settings.heartbeatIntervalMs,
    },
  };
  if (settings.publicUrl !== undefined) options.publicUrl = settings.publicUrl;
  if (settings.tcpPorts !== undefined) options.tcpPorts = settings.tcpPorts;
  if (settings.nodeId !== undefined) options.nodeId = settings.nodeId;
  if (settings.sessionRequestBurst !== undefined) options.sessionRequestBurst = settings.sessionRequestBurst;
  const tls = tlsOf(settings);
  if (tls !== undefined) options.tls = tls;
  const shared = settings.registry !== 'memory';
  if (shared || settings.nodeUrl !== undefined || settings.clusterSecret !== undefined) {
    if (settings.nodeUrl === undefined || settings.clusterSecret === undefined) {
      throw new EdgeError(
        EdgeErrorCode.INVALID_CONFIG,
        shared
          ? 'the redis registry is for several nodes: it needs nodeUrl (--node-url) and clusterSecret (--cluster-secret)'
          : 'cluster mode needs both nodeUrl (--node-url) and clusterSecret (--cluster-secret)',
      );
    }
    if (!shared) {
      // Nodes find each other through the registry: separate processes cannot share a memory one.
      throw new EdgeError(
        EdgeErrorCode.INVALID_CONFIG,
        'cluster mode (nodeUrl, clusterSecret) needs a registry the nodes share: --registry redis://<host>:6379',
      );
    }
    options.cluster = { nodeUrl: settings.nodeUrl, secret: settings.clusterSecret };
  }
  return options;
}

/** The TLS pairs, in order (the n-th cert with the n-th key), and the redirect port; undefined without TLS. */
function tlsOf(settings: EdgeSettings): EdgeTlsOptions | undefined {
  const { tlsCert, tlsKey } = settings;
  if (tlsCert.length !== tlsKey.length) {
    throw new EdgeError(
      EdgeErrorCode.INVALID_CONFIG,
      `tlsCert and tlsKey come in pairs (the n-th certificate with the n-th key): ${tlsCert.length} certificate(s), ${tlsKey.length} key(s)`,
    );
  }
  if (tlsCert.length === 0) {
    if (settings.httpPort !== undefined) {
      throw new EdgeError(
        EdgeErrorCode.INVALID_CONFIG,
        'httpPort (--http-port) redirects to HTTPS: it needs tlsCert and tlsKey (--tls-cert, --tls-key)',
      );
    }
    if (settings.acmeDir !== undefined) {
      throw new EdgeError(
        EdgeErrorCode.INVALID_CONFIG,
        'acmeDir (--acme-dir) is served on httpPort (--http-port), with TLS',
      );
    }
    return undefined;
  }
  if (settings.acmeDir !== undefined && settings.httpPort === undefined) {
    throw new EdgeError(
      EdgeErrorCode.INVALID_CONFIG,
      'acmeDir (--acme-dir) is served on httpPort (--http-port): set it too',
    );
  }
  const tls: EdgeTlsOptions = { pairs: tlsCert.map((cert, i) => ({ cert, key: tlsKey[i]! })) };
  if (settings.httpPort !== undefined) tls.httpPort = settings.httpPort;
  if (settings.acmeDir !== undefined) tls.acmeDir = settings.acmeDir;
  return tls;
}
