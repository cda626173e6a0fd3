import type { AgentError } from '../errors.js';
import type { RequestReport } from '../forwarding/forward-options.js';
import type { TcpConnectionReport } from '../forwarding/tcp-forward.js';
import type { SessionInfo } from '../session/agent-session.js';
import type { ReconnectingEvent } from '../session/tunnel.js';
import { terminalSafe } from '../terminal-text.js';
import { cutText, finishingText, type InFlightUnit } from './in-flight-text.js';
import { isoNow } from './json-time.js';
import type { LineOutput } from './line-writer.js';

export interface Reporter {
  /**
   * `inspectorUrl`: the request inspector's address, when it is on. `backendProtocol`: what an HTTP tunnel
   * speaks to its backend (`http/1.1`, `h2c`, `h2`), when known.
   */
  ready(info: SessionInfo, target: string, inspectorUrl?: string, backendProtocol?: string): void;
  request(report: RequestReport): void;
  /** A replica: the number of agents serving its name changed while connected (the edge said so). */
  replicas?(count: number): void;
  /** A TCP tunnel's connection ended. */
  connection(report: TcpConnectionReport): void;
  reconnecting(event: ReconnectingEvent): void;
  error(error: AgentError): void;
  /** Advice on what to do next (`code`: a stable TUNNEL2_HINT_* name), e.g. how to get an edge. */
  hint(code: string, message: string): void;
  /**
   * The first Ctrl-C (or SIGTERM) came with `count` requests or connections in flight: they are let finish
   * (up to the close's grace), unless a second one comes.
   */
  finishing(count: number, unit: InFlightUnit, signal?: string): void;
  /** `cut`: a second Ctrl-C stopped the command at once, with these still in flight. */
  closed(cut?: InFlightCut): void;
}

/** What stopping cut: the requests or connections still in flight at a second Ctrl-C, or at the grace's end. */
export interface InFlightCut {
  count: number;
  unit: InFlightUnit;
  /** Cut because the first Ctrl-C's grace (this long) ran out, not by a second Ctrl-C. */
  afterMs?: number | undefined;
}

type Write = (line: string) => void;

/** `tunnel`: the tunnel's name in a config file (`tunnel2 start`), on each of its events or lines. */
export interface ReporterOptions {
  tunnel?: string | undefined;
}

/** `--json`: one JSON object per line on stdout; `event` names are a public contract. */
export function createJsonReporter(out: LineOutput, options: ReporterOptions = {}): Reporter {
  const name = options.tunnel;
  const tunnel = name === undefined ? {} : { tunnel: name };
  const line = (event: string, fields: object): string =>
    `${JSON.stringify({ event, time: isoNow(), ...tunnel, ...fields })}\n`;
  // A line per request: an object of one fixed shape, not the spread above (two fewer objects per request,
  // and JSON.stringify meets one shape). The keys and their order are the same: JSON.stringify leaves out a
  // field that is undefined, so an absent tunnel name or `error` is left out as the spread leaves it out.
  const requestLine = (r: RequestReport): string =>
    `${JSON.stringify({
      event: 'request',
      time: isoNow(),
      tunnel: name,
      method: r.method,
      path: r.path,
      status: r.status,
      durationMs: r.durationMs,
      bytes: r.bytes,
      error: r.error,
    })}\n`;
  const emit = (event: string, fields: object): void => out.write(line(event, fields));
  // `closed` is the last event: a request or connection cut by the close may report after it.
  let over = false;
  return {
    replicas: (count) => emit('replicas', { replicas: count }),
    ready: (info, target, inspectorUrl, backendProtocol) =>
      emit('ready', {
        name: info.name,
        url: info.url,
        urls: info.urls,
        target,
        // A replica: how many agents serve the name with this one at connect (then `replicas` events).
        ...(info.replicas === undefined ? {} : { replicas: info.replicas }),
        ...(backendProtocol === undefined ? {} : { backendProtocol }),
        ...(inspectorUrl === undefined ? {} : { inspectorUrl }),
      }),
    request: (report) => {
      if (!over) out.writeBatched(requestLine(report));
    },
    connection: (report) => {
      if (!over) out.writeBatched(line('connection', report));
    },
    reconnecting: (event) => emit('reconnecting', event),
    error: (error) =>
      emit('error', {
        code: error.code,
        message: error.message,
        status: error.status,
        edgeCode: error.edgeCode,
        fatal: error.fatal,
      }),
    hint: (code, message) => emit('hint', { code, message }),
    finishing: (count) => emit('finishing', { count }),
    closed: (cut) => {
      over = true;
      emit('closed', cut === undefined ? {} : { cut: cut.count });
    },
  };
}

/**
 * `--json`'s `dropped` event: `count` lines stdout could not take while it was not read (request and
 * connection lines first), written once it drains again.
 */
export function jsonDroppedLine(count: number): string {
  return `${JSON.stringify({ event: 'dropped', time: isoNow(), count })}\n`;
}

/** Human output: the public URL(s) first, then one line per request. */
export function createHumanReporter(stdout: LineOutput, err: Write, options: ReporterOptions = {}): Reporter {
  const prefix = options.tunnel === undefined ? '' : `${options.tunnel}  `;
  const out = (line: string): void => stdout.write(line === '\n' ? line : prefix + line);
  let announced: string | undefined;
  // What a replica's fellows share: a TCP replica's, its public port.
  let shared = 'name';
  // The closing line is the last: a request or connection cut by the close may report after it.
  let over = false;
  return {
    replicas(count) {
      out(`        replicas  ${count} agents on this ${shared} now\n`);
    },
    ready(info, target, inspectorUrl, backendProtocol) {
      shared = info.tcp === undefined ? 'name' : 'port';
      if (announced !== undefined) {
        // A TCP tunnel whose port was taken while it was away comes back on another one.
        out(
          info.url === announced
            ? `reconnected: ${info.url}\n`
            : `reconnected at a new address: ${info.url} (the previous one was taken)\n`,
        );
        announced = info.url;
        return;
      }
      announced = info.url;
      out(`tunnel2: forwarding ${info.url} -> ${targetWithProtocol(target, backendProtocol)}\n`);
      for (const url of info.urls.filter((u) => u !== info.url)) out(`         also at  ${url}\n`);
      if (inspectorUrl !== undefined) out(`       inspector  ${inspectorUrl}\n`);
      if (info.replicas !== undefined) out(`        replicas  ${info.replicas} agents on this ${shared}\n`);
      out('\n');
    },
    request(r) {
      if (!over) stdout.writeBatched(prefix + requestLine(r));
    },
    connection(c) {
      if (!over) stdout.writeBatched(prefix + connectionLine(c));
    },
    reconnecting(e) {
      err(`${reconnectLine(e, announced !== undefined)}\n`);
    },
    error(e) {
      // One line per attempt: a failure that is retried is said by the reconnect line that follows it.
      // Its words may be an edge's (a refusal's text): shown, never obeyed by the terminal.
      if (e.fatal) err(`tunnel2: ${terminalSafe(e.message)}\n`);
    },
    hint(_code, message) {
      err(`tunnel2: ${message}\n`);
    },
    finishing(count, unit, signal) {
      err(`tunnel2: ${finishingText(count, unit, signal)}\n`);
    },
    closed(cut) {
      over = true;
      err(
        cut === undefined ? 'tunnel2: closed\n' : `tunnel2: ${cutText(cut.count, cut.unit, cut.afterMs)}\n`,
      );
    },
  };
}

/** The target as a line shows it: with its protocol when that is HTTP/2 (`http://localhost:50051 (h2c)`). */
export function targetWithProtocol(target: string, backendProtocol: string | undefined): string {
  return backendProtocol === 'h2c' || backendProtocol === 'h2' ? `${target} (${backendProtocol})` : target;
}

/**
 * The one line of a retry: a run that never connected is still trying (the reason is the whole story),
 * one that was connected lost its connection. The attempt counts the failures in a row.
 */
export function reconnectLine(e: ReconnectingEvent, wasConnected: boolean): string {
  const delay = `${(e.delayMs / 1000).toFixed(1)} s`;
  const attempt = e.attempt > 0 ? ` (attempt ${e.attempt})` : '';
  // The reason may carry an edge's words (its refusal, its close reason).
  const reason = terminalSafe(e.reason);
  return wasConnected
    ? `tunnel2: connection lost (${reason}); reconnecting in ${delay}${attempt}`
    : `tunnel2: ${reason}; retrying in ${delay}${attempt}`;
}

/** A request's line; `styleStatus` colours the status on a terminal. */
export function requestLine(
  r: RequestReport,
  styleStatus: (status: number, text: string) => string = (_, text) => text,
): string {
  return activityLine(
    // The method and path are a public client's (as the edge passed them on).
    `${terminalSafe(r.method).padEnd(7)} ${terminalSafe(r.path)}  ${styleStatus(r.status, String(r.status || '---'))}`,
    r.durationMs,
    r.error === undefined ? undefined : terminalSafe(r.error),
  );
}

/** A TCP connection's line, once it ended. */
export function connectionLine(c: TcpConnectionReport): string {
  const client = c.clientAddress.includes(':') ? `[${c.clientAddress}]` : c.clientAddress;
  const why = c.outcome === 'closed' ? undefined : `${c.outcome}${c.error ? `: ${c.error}` : ''}`;
  return activityLine(`${client}:${c.clientPort}  in ${c.bytesIn} B  out ${c.bytesOut} B`, c.durationMs, why);
}

/** One request's or connection's line: local time, what it was, how long it took, why it did not end well. */
function activityLine(what: string, durationMs: number, why: string | undefined): string {
  const time = new Date().toTimeString().slice(0, 8);
  return `${time}  ${what}  ${durationMs.toFixed(1)} ms${why ? `  (${why})` : ''}\n`;
}
