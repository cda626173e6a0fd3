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

function invalid(input: string): AgentError {
  return new AgentError(
    AgentErrorCode.INVALID_TARGET,
    `target "${input}" is not a port, host:port or http(s) URL (examples: 3000, localhost:3000, http://127.0.0.1:3000)`,
  );
}
