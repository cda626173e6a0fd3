import { isIP } from 'node:net';

/**
 * The block a client address is counted by where a share per address must hold: an IPv4 address itself, an
 * IPv6 address its /64 (`2001:db8:0:1::/64`). A host is routinely given a whole /64 (SLAAC, privacy
 * addresses), so a cap per IPv6 address would bound nothing: a client could use a fresh address for every
 * connection at no cost. Anything that is not an IP address is returned as it is.
 */
export function addressBlock(address: string): string {
  if (isIP(address) !== 6) return address;
  const bare = address.split('%')[0] ?? address;
  const [head = '', tail] = bare.split('::');
  const groups = (part: string): string[] => (part === '' ? [] : part.split(':'));
  const front = groups(head);
  if (tail !== undefined) {
    // A dotted IPv4 tail (`::1.2.3.4`) stands for two groups; it only ever ends an address, past the /64.
    const back = groups(tail).flatMap((group) => (group.includes('.') ? ['0', '0'] : [group]));
    front.push(...Array<string>(8 - front.length - back.length).fill('0'), ...back);
  }
  const prefix = front.slice(0, 4).map((group) => Number.parseInt(group, 16).toString(16));
  return `${prefix.join(':')}::/64`;
}
