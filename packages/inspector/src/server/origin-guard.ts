import type { IncomingHttpHeaders } from 'node:http';

/**
 * `Sec-Fetch-Site` values of a legitimate API call: the page's own fetches (`same-origin`) and what a user
 * types or a script sends (`none`, or no header at all). `same-site` is refused too: ports do not count in a
 * site, so the developer's own app on `http://localhost:3000` is same-site with the inspector on `:4040`.
 */
const ALLOWED_FETCH_SITES = new Set(['same-origin', 'none']);

/**
 * Why an API request must be refused as sent by another origin's page, or undefined. The Host guard alone
 * lets any page a browser shows send requests here with the right Host (a link, an `<img>`, a `fetch` in
 * `no-cors` mode, a form): it cannot read the answers, but it can make the agent work (a HAR export, a body
 * search) and take the page's places (live streams). Browsers say where a request comes from: `Sec-Fetch-Site`
 * (Chromium, Firefox, Safari 16.4+) and `Origin` (every cross-origin request but a plain navigation or
 * subresource, and every non-GET one); either naming another origin is enough. A client without them (curl,
 * a script) is a local process, which the guard cannot and does not try to tell apart from the user.
 */
export function crossOriginRefusal(headers: IncomingHttpHeaders): string | undefined {
  const site = headers['sec-fetch-site'];
  if (site !== undefined && !ALLOWED_FETCH_SITES.has(site.trim().toLowerCase())) {
    return `refused: the request comes from another site's page (Sec-Fetch-Site: ${site})`;
  }
  const origin = headers.origin;
  if (origin === undefined) return undefined;
  // Compared with the Host it was sent to: when the inspector listens on every interface, another
  // machine's address on the same port would pass the Host guard's own test.
  const host = headers.host;
  const originHost = URL.canParse(origin) ? new URL(origin) : undefined;
  const sameOrigin =
    originHost !== undefined &&
    originHost.protocol === 'http:' &&
    host !== undefined &&
    URL.canParse(`http://${host}`) &&
    new URL(`http://${host}`).host === originHost.host;
  return sameOrigin ? undefined : `refused: the request comes from another origin's page (Origin: ${origin})`;
}
