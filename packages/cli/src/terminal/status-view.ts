import { finishingText, type InFlightUnit } from './in-flight-text.js';

/** Where the session is, as the header shows it. */
export type SessionState =
  | { kind: 'connecting' }
  | { kind: 'online' }
  | { kind: 'reconnecting'; attempt: number }
  | { kind: 'draining' }
  /** After a first Ctrl-C: `open` requests or connections still in flight, let finish. */
  | { kind: 'finishing'; open: number; unit: InFlightUnit; signal?: string | undefined }
  | { kind: 'offline' };

/** One tunnel of the session: a list, so that several tunnels over one session each get their line. */
export interface TunnelRow {
  name: string;
  /** Its name in a config file (`tunnel2 start`): then every row leads with its label. */
  label?: string | undefined;
  url: string;
  /** Every address it answers at, `url` included. */
  urls: readonly string[];
  target: string;
  /** This tunnel's request inspector, when it has one (each tunnel of a file may start its own). */
  inspectorUrl?: string | undefined;
  /** A replica (`--replica`): how many agents served the name with this one when it connected. */
  replicas?: number | undefined;
}

export type ActivityUnit = 'requests' | 'connections';

/** What one kind of tunnel did: HTTP tunnels count requests, TCP tunnels connections. */
export interface Activity {
  unit: ActivityUnit;
  total: number;
  perMinute: number;
}

/** Everything the header shows, read at one moment. */
export interface StatusSnapshot {
  tunnels: readonly TunnelRow[];
  state: SessionState;
  /** The latest round trip to the edge in ms; 0 when not measured (yet). */
  rttMs: number;
  /** Requests and TCP connections since start, one entry per kind of tunnel the session carries. */
  activity: readonly Activity[];
  /** Requests or connections in progress. */
  open: number;
}

/** SGR parameters: the header's only styling. */
const Style = {
  Plain: '',
  Bold: '1',
  Dim: '2',
  Red: '31',
  Green: '32',
  Yellow: '33',
  Cyan: '36',
} as const;
type Style = (typeof Style)[keyof typeof Style];

type Segment = readonly [text: string, style: Style];

const STATE_STYLE: Record<SessionState['kind'], Style> = {
  connecting: Style.Yellow,
  online: Style.Green,
  reconnecting: Style.Yellow,
  draining: Style.Yellow,
  finishing: Style.Yellow,
  offline: Style.Red,
};

function stateText(state: SessionState): string {
  if (state.kind === 'reconnecting') return `reconnecting (attempt ${state.attempt})`;
  if (state.kind === 'finishing') return finishingText(state.open, state.unit, state.signal);
  return state.kind;
}

/**
 * The header's lines, each at most `width` columns (cut with an ellipsis: a header line that wrapped would
 * push the request lines down and break the in-place redraw). Styled only when `colour` is on.
 */
export function renderStatus(status: StatusSnapshot, width: number, colour: boolean): string[] {
  const rtt =
    status.rttMs > 0 ? `${status.rttMs < 10 ? status.rttMs.toFixed(1) : Math.round(status.rttMs)} ms` : '-';
  const lines: Segment[][] = [
    [
      ['tunnel2', Style.Bold],
      ['  ', Style.Plain],
      [stateText(status.state), STATE_STYLE[status.state.kind]],
      [
        `   rtt ${rtt}${status.activity.map((a) => `   ${a.unit} ${a.total} (${a.perMinute}/min)`).join('')}   open ${status.open}`,
        Style.Plain,
      ],
    ],
  ];
  const named = status.tunnels.length > 1 || status.tunnels.some((t) => t.label !== undefined);
  const shownName = (t: TunnelRow): string => t.label ?? t.name;
  const nameWidth = named ? Math.max(...status.tunnels.map((t) => shownName(t).length)) + 2 : 0;
  for (const tunnel of status.tunnels) {
    const lead = named ? `  ${shownName(tunnel).padEnd(nameWidth)}` : '  ';
    lines.push([
      [lead, Style.Plain],
      [tunnel.url, Style.Cyan],
      [` -> ${tunnel.target}`, Style.Plain],
      ...(tunnel.replicas === undefined
        ? []
        : ([[`   replicas ${tunnel.replicas}`, Style.Dim]] as Segment[])),
    ]);
    for (const other of tunnel.urls.filter((u) => u !== tunnel.url)) {
      lines.push([
        [`${' '.repeat(lead.length)}also `, Style.Dim],
        [other, Style.Plain],
      ]);
    }
    if (tunnel.inspectorUrl !== undefined) {
      lines.push([
        [`${' '.repeat(lead.length)}inspector `, Style.Dim],
        [tunnel.inspectorUrl, Style.Plain],
      ]);
    }
  }
  lines.push([['─'.repeat(Math.max(width, 1)), Style.Dim]]);
  return lines.map((segments) => fit(segments, width, colour));
}

/** The segments cut to `width` visible columns, then styled. */
function fit(segments: readonly Segment[], width: number, colour: boolean): string {
  let room = Math.max(width, 1);
  let out = '';
  for (const [text, style] of segments) {
    if (room <= 0) break;
    const chars = Array.from(text);
    const cut = chars.length > room;
    const shown = cut ? `${chars.slice(0, room - 1).join('')}…` : text;
    room -= cut ? room : chars.length;
    out += colour && style !== Style.Plain ? `\x1b[${style}m${shown}\x1b[0m` : shown;
    // The ellipsis ends the line: later segments would follow a cut one.
    if (cut) break;
  }
  return out;
}

/** A response status coloured by its class (2xx green, 3xx cyan, 4xx yellow, 5xx and none red). */
export function styleStatus(status: number, text: string): string {
  const style =
    status >= 200 && status < 300
      ? Style.Green
      : status >= 300 && status < 400
        ? Style.Cyan
        : status >= 400 && status < 500
          ? Style.Yellow
          : status >= 100 && status < 200
            ? Style.Plain
            : Style.Red;
  return style === Style.Plain ? text : `\x1b[${style}m${text}\x1b[0m`;
}
