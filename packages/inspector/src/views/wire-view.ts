import { forwardOf, type ReplayTarget } from '../capture/replay.js';
import type { EntryHosts } from '../entries/entry.js';
import { headerValue, type StoredBody, type StoredEntry } from '../entries/stored-entry.js';

/**
 * An entry as it crossed the wire: each message as HTTP/1.1 text (`GET /api/entries/:id/raw`), and the Host
 * each side of the agent saw (the entry's `hosts`). Built when asked from what the capture keeps anyway (the
 * heads as the protocol carried them, in order and in their case, and the bodies up to the limit): nothing
 * more is copied per exchange for it.
 */

/** One message as text: its head, its body when it shows as text, and what is not shown of it. */
export interface RawMessage {
  /** The hop this message crossed, in words. */
  hop: string;
  /** Start line and header lines, CRLF-terminated, then the empty line. */
  head: string;
  /** The captured body as UTF-8 text, null when there is none or it is not text. */
  body: string | null;
  /** Why the body is not shown whole (binary, truncated at the body limit), null when it is. */
  bodyNote: string | null;
}

export interface RawExchange {
  request: RawMessage;
  /** null when no response head came. */
  response: RawMessage | null;
}

export const REQUEST_HOP =
  'public client → edge: as the client sent it, minus the hop-by-hop fields; the edge set X-Forwarded-*';
export const RESPONSE_HOP = 'your backend → agent: as the backend answered, minus the hop-by-hop fields';
/** The agent answered for a backend that gave no answer (its error carries the x-tunnel2-error code). */
export const AGENT_ANSWER_HOP = "agent → public client: the agent's own answer, your backend gave none";
export const REPLAY_REQUEST_HOP = 'inspector → your backend: a replay, sent straight to the local target';
export const REPLAY_RESPONSE_HOP = 'your backend → inspector: as the backend answered the replay';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The bytes as text when they are UTF-8 without control bytes (whitespace aside), else undefined. */
function asText(bytes: Buffer): string | undefined {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return undefined;
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control bytes are exactly what marks binary
  return /[\x00-\x08\x0e-\x1f\x7f]/.test(text) ? undefined : text;
}

/**
 * A head field (or start-line part) with its control characters as Unicode's control pictures (CR as ␍, ESC
 * as ␛): the heads come from the edge and the backend, and a CR/LF inside a field would otherwise print as a
 * header line the peer never sent, an ESC reach the terminal the text is pasted into. Fields are latin1 on
 * the wire (no code unit above U+00FF), so a picture in the text is always one of these. A tab is kept: the
 * field grammar allows it.
 */
function visible(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what is replaced
  return text.replace(/[\x00-\x08\x0a-\x1f\x7f]/g, (c) =>
    String.fromCharCode(c === '\x7f' ? 0x2421 : 0x2400 + c.charCodeAt(0)),
  );
}

function headLines(startLine: string, headers: readonly string[]): string {
  let head = `${visible(startLine)}\r\n`;
  for (let i = 0; i + 1 < headers.length; i += 2) {
    head += `${visible(headers[i]!)}: ${visible(headers[i + 1]!)}\r\n`;
  }
  return `${head}\r\n`;
}

function bodyOf(body: StoredBody, headers: readonly string[]): Pick<RawMessage, 'body' | 'bodyNote'> {
  if (body.size === 0) return { body: null, bodyNote: null };
  const bytes = body.bytes();
  const text = asText(bytes);
  const notes: string[] = [];
  if (text === undefined) {
    const encoding = headerValue(headers, 'content-encoding');
    notes.push(
      `${bytes.length} bytes of binary${encoding === undefined ? '' : ` (${encoding}-encoded)`} body, not shown as text: see the Body section`,
    );
  }
  if (body.truncated) {
    notes.push(`captured ${body.captured} of ${body.size} bytes (the body limit): the rest was not kept`);
  }
  return { body: text ?? null, bodyNote: notes.length === 0 ? null : notes.join('; ') };
}

export function rawExchange(entry: StoredEntry): RawExchange {
  const replayed = entry.replayOf !== undefined;
  const request: RawMessage = {
    hop: replayed ? REPLAY_REQUEST_HOP : REQUEST_HOP,
    head: headLines(`${entry.method} ${entry.target} HTTP/1.1`, entry.requestHeaders),
    ...bodyOf(entry.request, entry.requestHeaders),
  };
  if (entry.status === 0) return { request, response: null };
  const reason = entry.responseStatusText;
  const response: RawMessage = {
    hop: replayed
      ? REPLAY_RESPONSE_HOP
      : headerValue(entry.responseHeaders, 'x-tunnel2-error') === undefined
        ? RESPONSE_HOP
        : AGENT_ANSWER_HOP,
    head: headLines(`HTTP/1.1 ${entry.status}${reason === '' ? '' : ` ${reason}`}`, entry.responseHeaders),
    ...(entry.kind === 'websocket'
      ? { body: null, bodyNote: 'upgraded: the WebSocket traffic that followed is counted, not kept' }
      : bodyOf(entry.response, entry.responseHeaders)),
  };
  return { request, response };
}

/**
 * The Host the public client sent and the one the agent forwarded to the backend. A replay had no public
 * client: its head is the one sent to the backend already.
 */
export function hostsOf(entry: StoredEntry, target: ReplayTarget): EntryHosts {
  if (entry.replayOf !== undefined) {
    return { public: null, backend: headerValue(entry.requestHeaders, 'host') ?? null };
  }
  const publicHost = headerValue(entry.requestHeaders, 'host') ?? null;
  const backendHost = headerValue(forwardOf(target)([...entry.requestHeaders]), 'host') ?? null;
  return { public: publicHost, backend: backendHost };
}
