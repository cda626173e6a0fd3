import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { tcpPortOfParam, type WindowBudget } from '@tunnel2/protocol';
import type { Logger } from 'pino';
import { WebSocketServer } from 'ws';
import type { ClientOriginResolver } from '../access/client-address.js';
import { rejectUpgrade } from '../answers/error-response.js';
import { EdgeErrorCode } from '../errors.js';
import type { ResolvedEdgeOptions } from '../settings/edge-options.js';
import { agentAccount } from './agent-account.js';
import { createAgentAuthenticator } from './agent-auth.js';
import { AgentConnection } from './agent-connection.js';
import { heldByOther, heldBySelf, NAME_HOLDER_HEADER, type NameRefusal } from './name-holder.js';
import { type PortClaims, TCP_ASK_PROBLEM } from './port-claims.js';
import { nameRefusal, ownerKey, randomSessionName } from './session-name.js';
import type { SessionTable } from './session-table.js';
import type { TcpPort } from './tcp-port.js';
import { createTunnelClaims } from './tunnel-claims.js';
import type { AgentSession } from './tunnel-entry.js';

export interface AgentEndpointOptions {
  options: ResolvedEdgeOptions;
  sessions: SessionTable;
  logger: Logger;
  /** One for the whole edge (`edgeWindowBudget`): every agent session's and node link's growth draws on it. */
  windowBudget: WindowBudget;
  /** Public URLs for a session name. */
  urlsFor: (name: string) => { url: string; urls: string[] };
  isDraining: () => boolean;
  /** Decides an agent's client address (the peer, or what a trusted proxy in front says). */
  clients: ClientOriginResolver;
  /** The public TCP ports, when the operator configured a range. */
  tcp: PortClaims | undefined;
  /** The public address of a TCP tunnel's port (`tcp://host:port`). */
  tcpUrlFor: (port: number) => string;
}

/** Header an agent sends so its reconnects resume its name even without a token. */
export const AGENT_KEY_HEADER = 'x-tunnel2-agent-key';
/** Header an agent sends with an id of its own run: its reconnects take over, another run is refused. */
export const AGENT_RUN_HEADER = 'x-tunnel2-agent-run';

/** A name refusal as an upgrade answer: the holder's kind in its header (name-holder.ts). */
function nameHeld(refusal: NameRefusal) {
  return { ...refusal, headers: { [NAME_HOLDER_HEADER]: refusal.holder } };
}

/**
 * The agents' door: checks the requested name and claims it in the registry before upgrading, so a
 * conflict is an HTTP 409 the CLI can print, then runs the protocol session over the WebSocket.
 */
export function createAgentEndpoint(endpoint: AgentEndpointOptions) {
  const { options, sessions, logger } = endpoint;
  const authenticator = createAgentAuthenticator(options.auth);
  // The client address of each live anonymous session. Anonymous agents pick their own agent key, so a
  // new key per connection would escape a limit counted by key: they are counted by address instead.
  const anonymousAddress = new WeakMap<AgentSession, string>();
  const countAnonymousFrom = (address: string): number => {
    let count = 0;
    for (const tunnel of sessions.tunnels()) if (anonymousAddress.get(tunnel.connection) === address) count++;
    return count;
  };
  const claims = createTunnelClaims({
    sessions,
    tcp: endpoint.tcp,
    logger,
    maxNamesPerOwner: options.maxSessionsPerOwner,
    reconnectGraceMs: options.reconnectGraceMs,
    namesHeld: (connection) => {
      const address = anonymousAddress.get(connection);
      return address === undefined ? sessions.countOwnedBy(connection.owner) : countAnonymousFrom(address);
    },
    anonymousAddress: (connection) => anonymousAddress.get(connection),
    urlsFor: endpoint.urlsFor,
    tcpUrlFor: endpoint.tcpUrlFor,
  });
  const wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: options.maxMessageSize,
    clientTracking: false,
  });

  async function handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    if (endpoint.isDraining()) {
      rejectUpgrade(socket, {
        code: EdgeErrorCode.DRAINING,
        message: 'edge is shutting down: connect again shortly',
      });
      return;
    }
    const url = new URL(req.url ?? '/', 'http://edge.invalid');
    const requested = url.searchParams.get('name')?.toLowerCase() || undefined;
    const refusal = requested === undefined ? undefined : nameRefusal(requested);
    if (refusal !== undefined) {
      rejectUpgrade(socket, refusal);
      return;
    }
    // `replica=1`: join the name beside the owner's other replicas rather than take it over (an older edge
    // ignores the parameter; the HELLO answer's `replicas` says this one did not).
    const replica = url.searchParams.get('replica') === '1';
    // A TCP replica shares a port it names: with `tcp=any` each agent would get a port of its own.
    const tcpAsk = url.searchParams.get('tcp');
    const askedPort = tcpAsk === null ? Number.NaN : tcpPortOfParam(tcpAsk);
    if (replica && (askedPort === undefined || askedPort === 0)) {
      rejectUpgrade(socket, {
        code: EdgeErrorCode.BAD_REQUEST,
        message: 'a TCP replica (--replica) shares a fixed public port: name it (--remote-port)',
      });
      return;
    }
    const auth = authenticator.check(bearerToken(req), headerValue(req, AGENT_KEY_HEADER) ?? randomUUID());
    if (!auth.ok) {
      rejectUpgrade(socket, authRefusal(auth.reason));
      return;
    }
    // The agent key still decides who owns a name (a reconnect resumes it); the limit counts the address.
    const owner = ownerKey(auth.identity);
    const address = auth.anonymous ? endpoint.clients.resolve(req).address : undefined;
    const held = address === undefined ? sessions.countOwnedBy(owner) : countAnonymousFrom(address);
    const account = agentAccount(owner, address);
    if (held >= options.maxSessionsPerOwner) {
      rejectUpgrade(socket, {
        code: EdgeErrorCode.TOO_MANY_SESSIONS,
        message:
          address === undefined
            ? `too many tunnels for this agent token (at most ${options.maxSessionsPerOwner} on this edge)`
            : `too many anonymous tunnels from this address (at most ${options.maxSessionsPerOwner} on this edge)`,
        retryAfterS: 10,
      });
      return;
    }
    // A TCP tunnel asks for its port the way an HTTP one asks for its name: in the URL, so a refusal is an
    // HTTP answer the CLI prints. `tcp=any` or `tcp=<port>`.
    let tcpPort: TcpPort | undefined;
    if (tcpAsk !== null) {
      const tcp = endpoint.tcp;
      if (tcp === undefined) {
        rejectUpgrade(socket, {
          code: EdgeErrorCode.TCP_DISABLED,
          message: 'this edge offers no TCP tunnels (its operator has not set --tcp-ports)',
        });
        return;
      }
      const claim = Number.isNaN(askedPort)
        ? ({ ok: false, code: EdgeErrorCode.BAD_REQUEST, message: TCP_ASK_PROBLEM } as const)
        : await tcp.claim(owner, askedPort, address, replica);
      if (!claim.ok) {
        rejectUpgrade(socket, { code: claim.code, message: claim.message });
        return;
      }
      tcpPort = claim.port;
    }
    const name = requested ?? randomSessionName();
    const run = headerValue(req, AGENT_RUN_HEADER)?.slice(0, 64);
    const self = { owner, run, anonymous: auth.anonymous };
    // Replicas of one owner share the port: another run of theirs joins it rather than being refused.
    const portJoins =
      replica && (tcpPort?.entries.every((entry) => entry.replica && entry.owner === owner) ?? false);
    const portRun =
      tcpPort === undefined || portJoins
        ? undefined
        : heldBySelf(`port ${tcpPort.port}`, tcpPort.connection, self);
    if (tcpPort !== undefined && portRun !== undefined) {
      endpoint.tcp?.abandon(tcpPort);
      rejectUpgrade(socket, nameHeld({ ...portRun, code: EdgeErrorCode.TCP_PORT_UNAVAILABLE }));
      return;
    }
    // A replica of the owner's live replicas shares their claim: no claim (and no takeover) of its own.
    const joinEpoch = replica ? sessions.joinable(name, owner) : undefined;
    const joined = joinEpoch !== undefined;
    const ownRun = joined ? undefined : heldBySelf(`subdomain "${name}"`, sessions.get(name), self);
    if (ownRun !== undefined) {
      if (tcpPort !== undefined) endpoint.tcp?.abandon(tcpPort);
      rejectUpgrade(socket, nameHeld(ownRun));
      return;
    }
    let admitted: Awaited<ReturnType<SessionTable['admit']>>;
    try {
      admitted = joined
        ? { ok: true, epoch: joinEpoch }
        : replica && tcpPort === undefined
          ? await sessions.admitReplica(name, owner, account)
          : await sessions.admit(name, owner, account);
    } catch (err) {
      logger.error({ err, session: name }, 'registry claim failed');
      if (tcpPort !== undefined) endpoint.tcp?.abandon(tcpPort);
      // A 503 the CLI retries (it never gives up on a 5xx): sessions already connected keep serving, only
      // new claims wait for the registry to come back.
      rejectUpgrade(socket, {
        code: EdgeErrorCode.REGISTRY_UNAVAILABLE,
        message:
          'the session registry is unavailable: new tunnels cannot be claimed right now, retry shortly',
        retryAfterS: 2,
      });
      return;
    }
    if (!admitted.ok) {
      if (tcpPort !== undefined) endpoint.tcp?.abandon(tcpPort);
      rejectUpgrade(socket, nameHeld(heldByOther(name, admitted.record, options.reconnectGraceMs)));
      return;
    }
    const epoch = admitted.epoch;
    const giveBack = (): void => {
      if (tcpPort !== undefined) endpoint.tcp?.abandon(tcpPort);
      if (joined) return; // the claim is its replicas'
      sessions
        .abandon(name, epoch, replica && tcpPort === undefined)
        .catch((err: unknown) => logger.warn({ err, session: name }, 'registry release failed'));
    };
    if (socket.destroyed) {
      giveBack();
      return;
    }
    // ws calls back only for a handshake it completes: one it refuses (a bad key or version) or a socket
    // the client closed meanwhile is destroyed without a word, and the claims must not outlive it.
    let upgraded = false;
    socket.once('close', () => {
      if (!upgraded) giveBack();
    });
    wss.handleUpgrade(req, socket, head, (ws) => {
      upgraded = true;
      const tcpUrl = tcpPort === undefined ? undefined : endpoint.tcpUrlFor(tcpPort.port);
      const urls = tcpUrl === undefined ? endpoint.urlsFor(name) : { url: tcpUrl, urls: [tcpUrl] };
      let activated = false;
      const connection = new AgentConnection({
        name,
        epoch,
        owner,
        account,
        socket: ws,
        beneath: socket,
        logger,
        protocol: options.protocol,
        maxStreamWindow: options.maxStreamWindow,
        sessionWindowBudget: options.sessionWindowBudget,
        edgeWindowBudget: endpoint.windowBudget,
        helloTimeoutMs: options.helloTimeoutMs,
        probeTimeoutMs: options.probeTimeoutMs,
        slots: {
          maxStreams: options.maxStreamsPerSession,
          maxWaitMs: options.streamWaitMs,
          maxWaiting: options.maxWaitingPerSession,
        },
        requestRate: options.sessionRequestRate,
        requestBurst: options.sessionRequestBurst,
        sessionInfo: {
          name,
          ...urls,
          ...(tcpPort ? { tcp: { port: tcpPort.port } } : {}),
          // How many agents serve the name with this one (at connect; then NOTICEs as it changes).
          ...(replica
            ? {
                replicas:
                  tcpPort === undefined
                    ? sessions.replicas(name).length + (joined ? 1 : 0) || 1
                    : tcpPort.entries.filter((entry) => entry.replica).length + 1,
              }
            : {}),
        },
        tcpPort: tcpPort?.port,
        run,
        replica,
        claimTunnels: claims.claim,
        onGoingAway: (connection) => {
          if (!activated) return;
          sessions.draining(connection);
          tcpPort?.tellReplicas(); // a TCP replica's fellows count the port's (draining ones not)
        },
        onReady: (connection) => {
          activated = sessions.activate(connection, joined);
          if (!activated) return;
          if (tcpPort !== undefined) endpoint.tcp?.attach(tcpPort, connection);
          claims.activate(connection);
        },
        onClose: (connection) => {
          if (tcpPort !== undefined) endpoint.tcp?.detach(tcpPort, connection);
          if (activated) void sessions.deactivate(connection);
          else if (!joined)
            sessions
              .abandon(name, epoch, replica && tcpPort === undefined)
              .catch((err: unknown) => logger.warn({ err, session: name }, 'registry release failed'));
          void claims.release(connection.extras, activated);
        },
      });
      if (address !== undefined) anonymousAddress.set(connection, address);
    });
  }

  return {
    handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
      handleUpgrade(req, socket, head).catch((err: unknown) => {
        logger.error({ err }, 'agent upgrade failed');
        socket.destroy();
      });
    },
    close(): void {
      wss.close();
    },
  };
}

function authRefusal(reason: 'missing' | 'invalid' | 'expired'): { code: EdgeErrorCode; message: string } {
  switch (reason) {
    case 'missing':
      return {
        code: EdgeErrorCode.AGENT_TOKEN_MISSING,
        message: 'this edge requires an agent token: pass --token or set TUNNEL2_TOKEN',
      };
    case 'expired':
      return {
        code: EdgeErrorCode.AGENT_TOKEN_EXPIRED,
        message: 'the agent token has expired: get a new one',
      };
    default:
      return {
        code: EdgeErrorCode.AGENT_TOKEN_INVALID,
        message: 'the agent token is not valid for this edge',
      };
  }
}

function headerValue(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function bearerToken(req: IncomingMessage): string | undefined {
  const auth = req.headers.authorization;
  if (auth === undefined) return undefined;
  const match = /^Bearer\s+(\S+)$/i.exec(auth);
  return match?.[1];
}
