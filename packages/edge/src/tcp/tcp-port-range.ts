/** A range of public TCP ports an operator hands to TCP tunnels (`--tcp-ports 20000-20999`). */
export interface TcpPortRange {
  first: number;
  last: number;
}

/** `20000-20999` or a single `20000`; undefined when the text is not a range of ports 1–65535. */
export function parseTcpPortRange(text: string): TcpPortRange | undefined {
  const match = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(text.trim());
  if (match === null) return undefined;
  const first = Number(match[1]);
  const last = match[2] === undefined ? first : Number(match[2]);
  if (first < 1 || last > 65535 || first > last) return undefined;
  return { first, last };
}
