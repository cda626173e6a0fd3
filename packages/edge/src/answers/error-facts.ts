/** What an error answer says, whatever its form (error-page.ts renders it). */

/** Where on the path a failure happened: the edge, the agent, or the local server the agent forwards to. */
export type ErrorWhere = 'edge' | 'agent' | 'backend';

/** Everything an error answer says, whatever its form. */
export interface ErrorFacts {
  status: number;
  /** A short reason, the page's heading: "Tunnel offline". */
  title: string;
  /** The stable `TUNNEL2_ERR_*` code, also in the `x-tunnel2-error` header. */
  code: string;
  /** What happened: the plain-text body, one line. */
  message: string;
  where: ErrorWhere;
  /** The local server (`localhost:3000`), for `where: 'backend'`. */
  target?: string | undefined;
  /** The public host the client asked for, for `where: 'edge'`. */
  host?: string | undefined;
  /** What to do, specific to the code; backquoted spans are commands. */
  hint: string;
  requestId?: string | undefined;
}
