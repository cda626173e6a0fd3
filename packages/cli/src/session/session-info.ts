import { terminalSafe } from '../terminal-text.js';

// What the edge's HELLO answer says about the tunnels it gave (PROTOCOL.md §8), read once and checked:
// names and URLs are printed on the user's terminal.

export interface SessionInfo {
  name: string;
  url: string;
  urls: string[];
  /** A TCP tunnel's public port (its url is `tcp://host:port`). */
  tcp?: { port: number };
  /**
   * Asked as a replica: how many agents serve the name with this one, as the edge said at connect and
   * since then in its NOTICEs (PROTOCOL.md §8) as replicas join and leave.
   */
  replicas?: number;
}

/** The edge's answer for one listed tunnel: its session info, or why it was refused. */
export type ExtraTunnelAnswer = { info: SessionInfo } | { error: { code: string; message: string } };

/** The session info in an edge's HELLO answer (or a listed tunnel's answer); undefined when unusable. */
export function readSessionInfo(meta: Record<string, unknown>): SessionInfo | undefined {
  const { name, url, urls, tcp, replicas } = meta;
  if (typeof name !== 'string' || typeof url !== 'string') return undefined;
  const list = Array.isArray(urls) ? urls.filter((u): u is string => typeof u === 'string') : [url];
  // Printed on the user's terminal as they are (the ready line, the header): an edge whose name or URLs hold
  // a control character is not believed (an escape sequence would be the terminal's to obey).
  if ([name, url, ...list].some((text) => terminalSafe(text) !== text)) return undefined;
  const port = typeof tcp === 'object' && tcp !== null ? (tcp as { port?: unknown }).port : undefined;
  return {
    name,
    url,
    urls: list,
    ...(typeof port === 'number' ? { tcp: { port } } : {}),
    ...(Number.isInteger(replicas) && (replicas as number) > 0 ? { replicas: replicas as number } : {}),
  };
}

/** The edge's per-tunnel answers; undefined when it sent none for tunnels that were asked (an older edge). */
export function readExtraAnswers(answers: unknown, asked: number): ExtraTunnelAnswer[] | undefined {
  if (asked === 0) return [];
  if (!Array.isArray(answers) || answers.length !== asked) return undefined;
  return answers.map((answer: unknown): ExtraTunnelAnswer => {
    const fields = typeof answer === 'object' && answer !== null ? (answer as Record<string, unknown>) : {};
    const info = readSessionInfo(fields);
    if (info !== undefined) return { info };
    const error = typeof fields.error === 'object' && fields.error !== null ? fields.error : {};
    const { code, message } = error as Record<string, unknown>;
    return {
      error: {
        code: typeof code === 'string' ? code : 'TUNNEL2_ERR_UNKNOWN',
        message: typeof message === 'string' ? message : 'refused by the edge',
      },
    };
  });
}
