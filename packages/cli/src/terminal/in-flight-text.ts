/** What a command's tunnels carry: HTTP tunnels requests, TCP tunnels connections, `tunnel2 start` maybe both. */
export type InFlightUnit = 'requests' | 'connections' | 'requests and connections';

/** `1 request`, `2 connections`, `1 request or connection`, `3 requests and connections`. */
export function inFlightCount(count: number, unit: InFlightUnit): string {
  if (count !== 1) return `${count} ${unit}`;
  return unit === 'requests and connections' ? '1 request or connection' : `1 ${unit.slice(0, -1)}`;
}

/**
 * After the first Ctrl-C (or SIGTERM) with some still in flight: they are let finish, and the way out is said
 * (as npm, cargo and docker compose say it): the same signal again (a process manager's log must not tell
 * its reader to type Ctrl-C).
 */
export function finishingText(count: number, unit: InFlightUnit, signal = 'SIGINT'): string {
  const again = signal === 'SIGINT' ? 'Ctrl-C' : signal;
  return `finishing ${inFlightCount(count, unit)} (${again} again to stop now)`;
}

/**
 * What stopping cut, in one line: after the second Ctrl-C, or (`afterMs`) once the first one's grace ran out
 * with some still in flight.
 */
export function cutText(count: number, unit: InFlightUnit, afterMs?: number): string {
  const were = count === 1 ? 'was' : 'were';
  if (afterMs !== undefined) {
    return `closed; ${inFlightCount(count, unit)} still in flight after ${afterMs / 1000} s ${were} cut short`;
  }
  if (count === 0) return 'stopped now; nothing was in flight';
  return `stopped now; ${inFlightCount(count, unit)} in flight ${were} cut short`;
}
