import { AgentError, AgentErrorCode } from '../errors.js';
import type { TargetTls } from './target-tls.js';

/** The local server requests are forwarded to. */
export interface Target {
  /** `http://host:port`, what the undici pool connects to. */
  origin: string;
  /** `host:port` as the backend expects it in a rewritten Host header. */
  host: string;
  /** A path prefix from a URL target (`http://localhost:3000/api` → `/api`), or ''. */
  basePath: string;
  /** An https:// target's certificate checks (--insecure, --ca); absent for http://. */
  tls?: TargetTls;
}

/**
 * Accepts `3000`, `host:port`, `[::1]:3000` or a URL (`http://localhost:3000/base`, `https://localhost:8443`).
 * Anything else (a bare word, a port out of range, another scheme) is refused here, at once, with the
 * accepted forms: a typo must not start a tunnel whose every request then fails.
 */
export function parseTarget(input: string): Target {
  const text = input.trim();
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(text)?.[1]?.toLowerCase();
  if (scheme !== undefined && scheme !== 'http' && scheme !== 'https') throw invalid(input);
  // Without a scheme a port is required: `notaport` is far more often a mistake than a host on port 80.
  const withPort = /^\d+$/.test(text)
    ? `http://localhost:${text}`
    : scheme !== undefined
      ? text
      : /^(\[[0-9a-f:.]+\]|[^:/\s[\]]+):\d+(\/\S*)?$/i.test(text)
        ? `http://${text}`
        : undefined;
  const url = withPort !== undefined && URL.canParse(withPort) ? new URL(withPort) : undefined;
  if (url === undefined || url.hostname === '') throw invalid(input);
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
    `target "${input}" is not a port, host:port or http(s) URL (examples: 3000, localhost:3000, http://127.0.0.1:3000, https://localhost:8443)`,
  );
}
