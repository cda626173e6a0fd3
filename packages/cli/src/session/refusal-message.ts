/** The edge's code for a subdomain another owner (token, or token-less agent process) holds. */
const NAME_IN_USE = 'TUNNEL2_ERR_NAME_IN_USE';

/** Where a tunnel was asked for: its refusals say what to change there. */
export interface RefusalContext {
  /** The tunnel's name in its config file (`tunnels.<label>`): it prefixes the refusal. */
  label?: string | undefined;
  /** The config file as the user named it (`tunnel2 start --config`): a taken name is changed there. */
  configFile?: string | undefined;
  /** The tunnel asked to join its name as a replica: a taken name says when that is possible. */
  replica?: boolean | undefined;
}

/** An edge's refusal of one tunnel: of the session's own (an HTTP `status`), or of a listed one (none). */
export interface Refusal {
  status?: number | undefined;
  edgeCode: string | undefined;
  /** The edge's own words. */
  text: string;
  /** The subdomain asked for. */
  name?: string | undefined;
  /**
   * A taken name's holder as the edge says it (header `x-tunnel2-name-holder`): `other`, `reserved` (in
   * another agent's reconnect grace, the text says until when) or `self` (another run with this agent's key
   * or token). Undefined from an older edge, whose words for a taken name are replaced by ours.
   */
  holder?: string | undefined;
}

/**
 * The line an edge's refusal of a tunnel becomes, for a session's own tunnel and a listed one alike. Most
 * refusals are clear as the edge words them; a taken name also says what to do about it where the name was
 * given (a flag, or a key of the config file), since retrying cannot help (the agent stops).
 */
export function refusalMessage(refusal: Refusal, context: RefusalContext = {}): string {
  const { status, edgeCode, text, name } = refusal;
  const lead = context.label === undefined ? '' : `tunnel ${context.label}: `;
  const taken = edgeCode === NAME_IN_USE;
  if (status === undefined) {
    // A listed tunnel's refusal: the edge's words and code, as the HELLO answer carried them.
    return `${lead}${text} (${edgeCode})${taken ? `. ${nameTakenAdvice(context)}` : ''}`;
  }
  if (taken && name !== undefined && refusal.holder !== undefined) {
    // The edge's own words carry the numbers (since when, free in how long); the advice is ours.
    const advice =
      refusal.holder === 'self'
        ? ''
        : refusal.holder === 'reserved'
          ? ` Wait for it, or ${lowerFirst(nameTakenAdvice(context))}`
          : ` ${nameTakenAdvice(context)}`;
    return `${lead}edge refused the tunnel (${status}): ${text}.${advice}`;
  }
  if (taken && name !== undefined) {
    return (
      `${lead}edge refused the tunnel (${status}): subdomain "${name}" is taken by another agent. ` +
      nameTakenAdvice(context)
    );
  }
  return `${lead}edge refused the tunnel (${status}): ${text}`;
}

/** What to do about a name another agent holds: ask for another where it was asked for, or prove it is yours. */
function nameTakenAdvice(context: RefusalContext): string {
  if (context.replica === true) {
    return (
      'A replica joins a name only when every agent serving it runs with --replica and the same token ' +
      '(or agent key), and only on an edge that supports replicas'
    );
  }
  if (context.configFile !== undefined && context.label !== undefined) {
    return (
      `Choose another tunnels.${context.label}.subdomain in ${context.configFile}, ` +
      'or run with the token that holds it (--token, TUNNEL2_TOKEN or token: in the file)'
    );
  }
  return 'Choose another --subdomain, or run with the token that holds it (--token or TUNNEL2_TOKEN)';
}

function lowerFirst(text: string): string {
  return text.charAt(0).toLowerCase() + text.slice(1);
}
