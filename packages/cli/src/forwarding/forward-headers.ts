import { type RawHeaders, withoutHopByHop } from '@tunnel2/protocol';
import type { HostHeaderMode } from './forward-options.js';
import type { Target } from './target.js';

// Fields undici refuses, plus those that only described the public hop (the edge already answered 100).
const dropOnForward = new Set(['expect', 'host']);

/**
 * A request head as the agent sends it to the local target: hop-by-hop fields and Expect out, Host as `mode`
 * says (the target's, the public one, or a given value). The inspector's replays go through it too.
 */
export function forwardHeaders(raw: RawHeaders, target: Target, mode: HostHeaderMode): string[] {
  const headers = withoutHopByHop(raw);
  const out: string[] = [];
  let publicHost: string | undefined;
  for (let i = 0; i < headers.length; i += 2) {
    const lower = headers[i]!.toLowerCase();
    if (lower === 'host') publicHost = headers[i + 1];
    if (dropOnForward.has(lower)) continue;
    out.push(headers[i]!, headers[i + 1]!);
  }
  const host = mode === 'rewrite' ? target.host : mode === 'preserve' ? publicHost : mode.value;
  if (host !== undefined) out.unshift('host', host);
  return out;
}
