/** The edge's code for a subdomain another owner (token, or token-less agent process) holds. */
const NAME_IN_USE = 'TUNNEL2_ERR_NAME_IN_USE';

/**
 * The line an edge's refusal of the tunnel becomes. Most refusals are clear as the edge words them; a
 * taken name also says what to do about it, since retrying cannot help (the agent stops).
 */
export function refusalMessage(
  status: number,
  edgeCode: string | undefined,
  text: string,
  name: string | undefined,
): string {
  if (edgeCode === NAME_IN_USE && name !== undefined) {
    return (
      `edge refused the tunnel (${status}): subdomain "${name}" is taken by another agent. ` +
      'Choose another --subdomain, or run with the token that holds it (--token or TUNNEL2_TOKEN)'
    );
  }
  return `edge refused the tunnel (${status}): ${text}`;
}
