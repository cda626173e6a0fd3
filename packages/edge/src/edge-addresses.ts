/**
 * The addresses the edge tells people about: where agents connect (`--server`) and the two forms of a
 * tunnel's URL. The startup banner and the landing page both print these, so they never suggest two
 * different servers (the banner used to print the listening address, 127.0.0.1 or 0.0.0.0, and the page the
 * public one). They derive from the same base as the URLs handed to agents (`publicUrl`, else
 * http://<domain>:<port>).
 */
export interface EdgeAddresses {
  /** What `tunnel2 http --server` takes. */
  server: string;
  /**
   * The command an agent runs, `<port>` standing for its local port. `tunnel2`, the command of the
   * `@tunnel2/cli` package however it was installed, never `npx tunnel2`: on npm `tunnel2` is an unrelated
   * package, and an agent runs on another machine than the edge, outside this repository (README.md,
   * "Install: what works where").
   */
  agentCommand: string;
  /** A tunnel under its own host name, `<name>` standing for the name. */
  tunnelByHost: string;
  /** A tunnel under the edge's own host, `<name>` standing for the name. */
  tunnelByPath: string;
}

export function edgeAddresses(base: URL): EdgeAddresses {
  const path = base.pathname.endsWith('/') ? base.pathname : `${base.pathname}/`;
  return {
    server: base.origin,
    agentCommand: `tunnel2 http <port> --server ${base.origin}`,
    tunnelByHost: `${base.protocol}//<name>.${base.host}${path}`,
    tunnelByPath: `${base.origin}${path}session/<name>/`,
  };
}
