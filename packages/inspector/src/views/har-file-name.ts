/**
 * The name a HAR export is downloaded under: `tunnel2-<tunnel name>-<entry id | "all" | "<n>-entries">-<UTC
 * YYYYMMDD-HHMMSS>.har`, so exports of several tunnels and moments sort and never overwrite each other in a
 * downloads folder. Only `[A-Za-z0-9._-]` reach the name (it goes into a Content-Disposition header and a file
 * system); anything else becomes `_`. The page builds the same name for its links' `download` attribute
 * (static/api.js, harFileName).
 */

/** Longest a tunnel name or an id may be inside a file name (a name is at most 63, an id a number). */
const MAX_PART = 63;

function safePart(text: string, fallback: string): string {
  const safe = text.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, MAX_PART);
  // A leading dot would hide the file on Unix; `..` alone is no name.
  return safe.replace(/^\.+/, '') || fallback;
}

/** `YYYYMMDD-HHMMSS` in UTC. */
export function utcStamp(at: Date): string {
  const iso = at.toISOString(); // 2026-11-28T15:18:41.123Z
  return `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}-${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}`;
}

/**
 * `name`: the tunnel's name (null before its first session: `tunnel`); `ids`: the exported entries' ids
 * (undefined or empty: all of them).
 */
export function harFileName(name: string | null, ids: readonly string[] | undefined, at: Date): string {
  const which =
    ids === undefined || ids.length === 0
      ? 'all'
      : ids.length === 1
        ? safePart(ids[0]!, 'entry')
        : `${ids.length}-entries`;
  return `tunnel2-${safePart(name ?? '', 'tunnel')}-${which}-${utcStamp(at)}.har`;
}

/**
 * A tunnel's name from its public URL, when no name was given: the path form's `/session/<name>/`, else the
 * host's first label (`<name>.example.com`); null for neither.
 */
export function nameFromPublicUrl(url: string | null): string | null {
  if (url === null || !URL.canParse(url)) return null;
  const { hostname, pathname } = new URL(url);
  const session = /^\/session\/([^/]+)/.exec(pathname);
  if (session !== null) return session[1]!;
  const label = hostname.split('.')[0];
  return label === undefined || label === '' || /^[\d[]/.test(hostname) ? null : label;
}
