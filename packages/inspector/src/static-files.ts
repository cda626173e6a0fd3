import { createReadStream } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.woff2': 'font/woff2',
};

/**
 * The page's folder: `static/` beside `dist/` (in the workspace, packages/inspector/static; in the bundled
 * CLI, publish/static, copied there by scripts/pack-cli.ts).
 */
export function defaultStaticDir(): string {
  return fileURLToPath(new URL('../static/', import.meta.url));
}

/** Streams one file of the page's folder; false when there is none at that path. */
export async function serveStatic(dir: string, pathname: string, res: ServerResponse): Promise<boolean> {
  // A browser asks for /favicon.ico where a page (a JSON answer opened in a tab) names no icon.
  const relative =
    pathname === '/'
      ? 'index.html'
      : pathname === '/favicon.ico'
        ? 'favicon.svg'
        : decodeURIComponent(pathname.slice(1));
  const file = normalize(join(dir, relative));
  if (!file.startsWith(normalize(dir + sep)) || relative.includes('\0')) return false;
  // node:fs/promises only once the page is asked for: an idle agent has no use for it (~0.9 MB of RSS when
  // loaded, bench/README.md, "Issue #34: the workspace agent's idle memory").
  const { stat } = process.getBuiltinModule('node:fs/promises');
  const info = await stat(file).catch(() => undefined);
  if (info === undefined || !info.isFile()) return false;
  res.writeHead(200, {
    'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
    'content-length': info.size,
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    // Never framed: a page of another site could otherwise overlay it and have the user click its buttons.
    'content-security-policy':
      "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
    'x-frame-options': 'DENY',
  });
  createReadStream(file).pipe(res);
  return true;
}
