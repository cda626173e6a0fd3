import { ANY_TCP_PORT } from '@tunnel2/protocol';
import type { Logger } from 'pino';
import { compileProtection } from '../access/public-protection.js';
import { EdgeErrorCode } from '../errors.js';
import type { AgentConnection, ClaimedTunnels } from './agent-connection.js';
import { ExtraTunnel } from './extra-tunnel.js';
import { heldByOther, heldBySelf } from './name-holder.js';
import { type PortClaims, TCP_ASK_PROBLEM } from './port-claims.js';
import { nameRefusal, randomSessionName } from './session-name.js';
import type { SessionTable } from './session-table.js';
import type { TcpPort } from './tcp-port.js';

export interface TunnelClaimsOptions {
  sessions: SessionTable;
  tcp: PortClaims | undefined;
  logger: Logger;
  /** Names one owner may hold on this edge (every tunnel of a session counts). */
  maxNamesPerOwner: number;
  /** How long a name stays reserved after its session ended (a refusal says when it is free). */
  reconnectGraceMs: number;
  /** Names `connection`'s owner holds now (the endpoint counts anonymous agents by address). */
  namesHeld: (connection: AgentConnection) => number;
  /** The client address of an anonymous agent's connection (its TCP ports count against it), else undefined. */
  anonymousAddress: (connection: AgentConnection) => string | undefined;
  urlsFor: (name: string) => { url: string; urls: string[] };
  tcpUrlFor: (port: number) => string;
}

type Refusal = { code: EdgeErrorCode; message: string };

/**
 * Claims the tunnels an agent listed in its HELLO (PROTOCOL.md "Several tunnels on one session"), one after
 * another, each exactly as the endpoint claims a session's own name and port: name checks, the per-owner
 * limit, the TCP port, the registry. Each ask gets its own answer, so the agent can say which tunnel failed
 * and why; a refused one takes nothing. Claims held when the session closed meanwhile are released.
 */
export function createTunnelClaims(options: TunnelClaimsOptions) {
  const { sessions, tcp } = options;

  async function claimOne(
    connection: AgentConnection,
    ask: unknown,
    tag: number,
    taken: Set<string>,
    held: number,
  ): Promise<ExtraTunnel | Refusal> {
    if (typeof ask !== 'object' || ask === null || Array.isArray(ask)) {
      return { code: EdgeErrorCode.BAD_REQUEST, message: 'a tunnel ask must be a JSON object' };
    }
    const { name: asked, tcp: tcpAsk, protect } = ask as Record<string, unknown>;
    if (asked !== undefined && typeof asked !== 'string') {
      return { code: EdgeErrorCode.BAD_REQUEST, message: 'name must be a string' };
    }
    const requested = asked?.toLowerCase();
    if (requested !== undefined) {
      const refusal = nameRefusal(requested);
      if (refusal !== undefined) return refusal;
      if (taken.has(requested)) {
        return { code: EdgeErrorCode.NAME_IN_USE, message: `subdomain "${requested}" is asked for twice` };
      }
    }
    if (held >= options.maxNamesPerOwner) {
      return {
        code: EdgeErrorCode.TOO_MANY_SESSIONS,
        message: `too many tunnels for this agent token (at most ${options.maxNamesPerOwner} on this edge)`,
      };
    }
    const protection = compileProtection(protect);
    if (protection !== undefined && 'error' in protection) {
      return {
        code: EdgeErrorCode.BAD_REQUEST,
        message: `invalid public URL protection: ${protection.error}`,
      };
    }
    let port: TcpPort | undefined;
    if (tcpAsk !== undefined) {
      if (tcp === undefined) {
        return {
          code: EdgeErrorCode.TCP_DISABLED,
          message: 'this edge offers no TCP tunnels (its operator has not set --tcp-ports)',
        };
      }
      const wanted = tcpAsk === ANY_TCP_PORT ? undefined : tcpAsk;
      if (wanted !== undefined && !(Number.isInteger(wanted) && typeof wanted === 'number')) {
        return { code: EdgeErrorCode.BAD_REQUEST, message: TCP_ASK_PROBLEM };
      }
      const claim = await tcp.claim(connection.owner, wanted, options.anonymousAddress(connection));
      if (!claim.ok) return { code: claim.code, message: claim.message };
      port = claim.port;
    }
    const name = requested ?? randomSessionName();
    const self = {
      owner: connection.owner,
      run: connection.run,
      anonymous: options.anonymousAddress(connection) !== undefined,
    };
    const portRun = port === undefined ? undefined : heldBySelf(`port ${port.port}`, port.connection, self);
    if (port !== undefined && portRun !== undefined) {
      tcp?.abandon(port);
      return { code: EdgeErrorCode.TCP_PORT_UNAVAILABLE, message: portRun.message };
    }
    const ownRun = heldBySelf(`subdomain "${name}"`, sessions.get(name), self);
    if (ownRun !== undefined) {
      if (port !== undefined) tcp?.abandon(port);
      return { code: ownRun.code, message: ownRun.message };
    }
    try {
      const admitted = await sessions.admit(name, connection.owner, connection.account);
      if (!admitted.ok) {
        if (port !== undefined) tcp?.abandon(port);
        const refusal = heldByOther(name, admitted.record, options.reconnectGraceMs);
        return { code: refusal.code, message: refusal.message };
      }
      taken.add(name);
      return new ExtraTunnel({
        name,
        epoch: admitted.epoch,
        port,
        protection,
        tag,
        connection,
      });
    } catch (err) {
      if (port !== undefined) tcp?.abandon(port);
      options.logger.error({ err, session: name }, 'registry claim failed');
      return {
        code: EdgeErrorCode.REGISTRY_UNAVAILABLE,
        message:
          'the session registry is unavailable: new tunnels cannot be claimed right now, retry shortly',
      };
    }
  }

  /**
   * Gives back what a session's listed tunnels hold (it closed before, or after, they went live). Never
   * rejects: it runs unawaited from a session's close, and a registry that is down (its lease then runs out
   * by itself) must neither crash the edge nor keep the later entries from being given back.
   */
  async function release(entries: readonly ExtraTunnel[], activated: boolean): Promise<void> {
    for (const entry of entries) {
      try {
        if (entry.port !== undefined) {
          if (activated) tcp?.detach(entry.port, entry);
          else tcp?.abandon(entry.port);
        }
        if (activated) await sessions.deactivate(entry);
        else await sessions.abandon(entry.name, entry.epoch);
      } catch (err) {
        options.logger.warn({ err, session: entry.name }, 'registry release failed');
      }
    }
  }

  return {
    async claim(connection: AgentConnection, asks: unknown[]): Promise<ClaimedTunnels> {
      const entries: ExtraTunnel[] = [];
      const answers: Record<string, unknown>[] = [];
      const taken = new Set<string>([connection.name]);
      let held = options.namesHeld(connection);
      for (const [i, ask] of asks.entries()) {
        const result = await claimOne(connection, ask, i + 1, taken, held);
        if (result instanceof ExtraTunnel) {
          held++;
          entries.push(result);
          const urls =
            result.tcpPort === undefined
              ? options.urlsFor(result.name)
              : { url: options.tcpUrlFor(result.tcpPort), urls: [options.tcpUrlFor(result.tcpPort)] };
          answers.push({
            name: result.name,
            ...urls,
            ...(result.tcpPort === undefined ? {} : { tcp: { port: result.tcpPort } }),
          });
        } else answers.push({ error: result });
      }
      if (connection.session.closed) {
        await release(entries, false);
        return { entries: [], answers };
      }
      return { entries, answers };
    },
    /** The session is ready: its listed tunnels are served from now on. */
    activate(connection: AgentConnection): void {
      for (const entry of connection.extras) {
        sessions.activate(entry);
        if (entry.port !== undefined) tcp?.attach(entry.port, entry);
      }
    },
    release,
  };
}
