// Exchanges still running (a long poll, an SSE stream, a hung backend, a WebSocket): GET /api/inflight, asked
// once a second while the page is visible (never two at once), shown above the list until their entry
// arrives over the event stream. Capture keeps no listener for this: it costs nothing while no page looks.

import { api } from './api.js';
import { el, formatBytes, formatMs, pairTable, pathCell, statusClass } from './dom.js';

const POLL_MS = 1000;
/**
 * Keys (`flightKey`) of the entries seen lately: a poll answered before an entry came must not bring its row
 * back. A key is never given to another exchange, so none of them hides a running one.
 */
const ENDED_KEPT = 500;

/** The row id of an in-flight exchange (entries' ids are numbers, so the two never meet). */
export const liveId = (key) => `live:${key}`;
export const isLive = (id) => id?.startsWith('live:') === true;

function target(e) {
  return e.query === '' ? e.path : `${e.path}?${e.query}`;
}

/** The page's filters, applied here where an exchange so far can answer them; a body filter hides them all. */
function visible(e, f) {
  if (f.body !== '') return false;
  if (f.method !== '' && e.method.toUpperCase() !== f.method.toUpperCase()) return false;
  if (f.path !== '' && !target(e).toLowerCase().includes(f.path.toLowerCase())) return false;
  if (f.status !== '') {
    const wanted = f.status.toLowerCase();
    if (e.status === 0) return false;
    const ok = wanted.endsWith('xx')
      ? Math.floor(e.status / 100) === Number(wanted[0])
      : e.status === Number(wanted);
    if (!ok) return false;
  }
  if (f.header !== '') {
    // Only the request head is known yet.
    const colon = f.header.indexOf(':');
    const name = (colon < 0 ? f.header : f.header.slice(0, colon)).trim().toLowerCase();
    const value =
      colon < 0
        ? ''
        : f.header
            .slice(colon + 1)
            .trim()
            .toLowerCase();
    const has = e.requestHeaders.some(
      ([n, v]) => n.toLowerCase() === name && v.toLowerCase().includes(value),
    );
    if (!has) return false;
  }
  return true;
}

function bytesText(e) {
  return `↑${formatBytes(e.requestBytes)} ↓${formatBytes(e.responseBytes)}`;
}

/** The pulsing dot, then the status once the response head came (`before` until then). */
function liveStatus(tag, e, before) {
  return el(
    tag,
    { class: `status ${e.status === 0 ? '' : statusClass(e.status)}` },
    el('span', { class: 'live-dot', 'aria-hidden': 'true' }),
    e.status === 0 ? before : String(e.status),
  );
}

function row(e, selected) {
  const id = liveId(e.key);
  return el(
    'tr',
    { 'data-id': id, class: `inflight${id === selected ? ' selected' : ''}`, title: 'still running' },
    el('td', { class: 'muted' }, new Date(e.startedAt).toLocaleTimeString([], { hour12: false })),
    el('td', { class: 'method' }, e.method),
    liveStatus('td', e, '…'),
    pathCell(e),
    el('td', { class: 'num live-time', title: 'running for' }, formatMs(e.durationMs)),
    el('td', { class: 'num' }, bytesText(e)),
  );
}

/** The detail of an exchange still running: what is known so far. */
export function inFlightView(e, close) {
  const query = e.query === '' ? [] : [...new URLSearchParams(e.query)];
  const started = e.startedAt.replace('T', ' ').replace('Z', ' UTC');
  return [
    el(
      'div',
      { class: 'title' },
      el('span', { class: 'method' }, e.method),
      liveStatus('span', e, 'waiting'),
      el('span', { class: 'target' }, target(e)),
    ),
    el(
      'p',
      { class: 'muted facts' },
      `in flight · ${started} · running for ${formatMs(e.durationMs)} · ${bytesText(e)} so far`,
    ),
    el(
      'div',
      { class: 'actions' },
      el('button', { type: 'button', class: 'close', title: 'Close (Esc)', onclick: close }, '✕'),
    ),
    el(
      'p',
      { class: 'note live-note' },
      e.status === 0
        ? 'Still running: the backend has not answered yet. '
        : 'Still running: the response head came, its body has not ended. ',
      'Bodies, response headers and the actions (replay, curl, HAR) come with its entry, which replaces this row when the exchange ends.',
    ),
    el(
      'details',
      { class: 'section', open: true },
      el('summary', {}, `Request headers (${e.requestHeaders.length})`),
      pairTable(e.requestHeaders),
    ),
    query.length > 0 &&
      el(
        'details',
        { class: 'section', open: true },
        el('summary', {}, `Query (${query.length})`),
        pairTable(query),
      ),
  ].filter(Boolean);
}

/**
 * `body`: the list's in-flight tbody; `filter()`: the page's filter values; `selected()`: the selected row id;
 * `onChange()`: after each render (counts, empty state, an open in-flight detail).
 */
export function createInFlight({ body, filter, selected, onChange }) {
  let exchanges = [];
  const ended = new Set();
  let timer;
  let asking = false;

  function render() {
    const f = filter();
    body.replaceChildren(...exchanges.filter((e) => visible(e, f)).map((e) => row(e, selected())));
    onChange();
  }

  let unlisted = 0;
  async function poll() {
    timer = undefined;
    if (document.hidden || asking) return;
    asking = true;
    try {
      const answer = await api.inflight();
      exchanges = answer.exchanges.filter((e) => !ended.has(e.key));
      // The API lists the newest 100: the rest are counted, so the page can say they are there.
      unlisted = Math.max(0, answer.total - answer.exchanges.length);
      render();
    } catch {
      // The agent may be restarting: the next poll tries again.
    } finally {
      asking = false;
    }
    if (!document.hidden) timer = setTimeout(poll, POLL_MS);
  }

  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && timer === undefined && !asking) void poll();
  });

  return {
    start: () => void poll(),
    render,
    /** How many in-flight rows the filters leave. */
    shown: () => body.children.length,
    /** Exchanges running beyond those the API listed. */
    unlisted: () => unlisted,
    get: (id) => exchanges.find((e) => liveId(e.key) === id),
    /** An entry came: the exchange it ends leaves the group; answers that row's id, if it was listed. */
    ended(entry) {
      const key = entry.flightKey;
      ended.add(key);
      if (ended.size > ENDED_KEPT) ended.delete(ended.values().next().value);
      const gone = exchanges.find((e) => e.key === key);
      if (gone === undefined) {
        // One of those running beyond the listed ones ended (the next poll says for sure).
        if (unlisted > 0) {
          unlisted--;
          onChange();
        }
        return undefined;
      }
      exchanges = exchanges.filter((e) => e !== gone);
      render();
      return liveId(gone.key);
    },
  };
}
