import { AgentError, AgentErrorCode } from './errors.js';

/** The local server requests are forwarded to. */
export interface Target {
  /** `http://host:port`, what the undici pool connects to. */
  origin: string;
  /** `host:port` as the backend expects it in a rewritten Host header. */
  host: string;
  /** A path prefix from a URL target (`http://localhost:3000/api` → `/api`), or ''. */
  basePath: string;
}

/** Accepts `3000`, `host:port`, `[::1]:3000` or a URL (`http://localhost:3000/base`). */
export function parseTarget(input: string): Target {
  const text = input.trim();
  let url: URL;
  if (/^\d+$/.test(text)) {
    url = new URL(`http://localhost:${text}`);
  } else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) {
    url = new URL(text);
  } else if (URL.canParse(`http://${text}`)) {
    url = new URL(`http://${text}`);
  } else {
    throw invalid(input);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new AgentError(
      AgentErrorCode.INVALID_TARGET,
      `target ${input}: only http and https targets are supported`,
    );
  }
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw invalid(input);
  const basePath = url.pathname === '/' ? '' : url.pathname.replace(/\/$/, '');
  return { origin: url.origin, host: url.host || `${url.hostname}:${port}`, basePath };
}

/** Where a TCP tunnel's connections go. */
export interface TcpTarget {
  host: string;
  port: number;
}

/**
 * A TCP tunnel's target: `5432` (on localhost), `host:port` or `[v6]:port`. The port is required: a TCP
 * service has no default one, and a URL's scheme says nothing about the bytes carried.
 */
export function parseTcpTarget(input: string): TcpTarget {
  const text = input.trim();
  const match = /^\d+$/.test(text)
    ? ['', 'localhost', text]
    : /^(\[[0-9a-f:.]+\]|[^:/\s[\]]+):(\d+)$/i.exec(text);
  const port = Number(match?.[2]);
  if (match === null || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new AgentError(
      AgentErrorCode.INVALID_TARGET,
      `TCP target "${input}" is not a port or host:port (examples: 5432, localhost:5432, 10.0.0.5:6379, [::1]:5432)`,
    );
  }
  return { host: (match[1] ?? '').replace(/^\[|\]$/g, ''), port };
}

/** `host:port` as printed, with an IPv6 host in brackets. */
export function tcpTargetLabel(target: TcpTarget): string {
  return `${target.host.includes(':') ? `[${target.host}]` : target.host}:${target.port}`;
}

function invalid(input: string): AgentError {
  return new AgentError(
    AgentErrorCode.INVALID_TARGET,
    `target "${input}" is not a port, host:port or http(s) URL (examples: 3000, localhost:3000, http://127.0.0.1:3000)`,
  );
}
