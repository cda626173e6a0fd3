// The inspector page: the live list (SSE) under the exchanges still running, the filters (server-side),
// keyboard navigation and the header actions.

import { api, harFileName } from './api.js';
import { showDetail } from './detail.js';
import { el, formatBytes, formatMs, pathCell, statusClass } from './dom.js';
import { createInFlight, inFlightView, isLive } from './inflight.js';

const $ = (id) => document.getElementById(id);
const rows = $('entries');
const detailPane = $('detail');
const FILTERS = {
  method: $('f-method'),
  status: $('f-status'),
  path: $('f-path'),
  header: $('f-header'),
  body: $('f-body'),
};
const MAX_ROWS = 1000;

const state = {
  selected: undefined,
  open: undefined,
  paused: false,
  publicUrl: null,
  name: null,
  target: '',
  count: 0,
};

function filter() {
  return Object.fromEntries(Object.entries(FILTERS).map(([key, input]) => [key, input.value.trim()]));
}

function filtering() {
  return Object.values(filter()).some((v) => v !== '');
}

function sizeText(e) {
  if (e.kind === 'websocket' && e.ws !== undefined) {
    const way = (bytes, messages) =>
      messages === undefined ? formatBytes(bytes) : `${messages} msg ${formatBytes(bytes)}`;
    return `↑${way(e.ws.bytesIn, e.ws.messagesIn)} ↓${way(e.ws.bytesOut, e.ws.messagesOut)}`;
  }
  return formatBytes(e.responseBytes);
}

function row(e) {
  const time = new Date(e.startedAt).toLocaleTimeString([], { hour12: false });
  const status = e.status === 0 ? 'ERR' : String(e.status);
  return el(
    'tr',
    { 'data-id': e.id, class: e.id === state.selected ? 'selected' : undefined, title: e.error?.message },
    el('td', { class: 'muted' }, time),
    el('td', { class: 'method' }, e.method),
    el('td', { class: `status ${statusClass(e.status)}` }, status),
    pathCell(e),
    el('td', { class: 'num' }, formatMs(e.durationMs)),
    el('td', { class: 'num' }, sizeText(e)),
  );
}

function renderEmpty() {
  const empty = $('list-empty');
  if (rows.children.length > 0 || inFlight.shown() > 0) {
    empty.replaceChildren();
    return;
  }
  if (filtering()) {
    empty.replaceChildren(el('p', {}, 'No request matches these filters.'));
    return;
  }
  const url = state.publicUrl ?? 'your public URL';
  empty.replaceChildren(
    el('p', {}, state.paused ? 'Capture is paused: resume it to record requests.' : 'No requests yet.'),
    el('p', {}, 'Send a request to ', el('code', {}, url), ' and it shows up here while it runs.'),
    el('pre', { class: 'code' }, `curl ${url}/hello`),
  );
}

function renderCount() {
  const live = inFlight.shown();
  const more = inFlight.unlisted();
  const flight =
    more > 0
      ? ` · ${live} in flight (${more} more running, not listed)`
      : live > 0
        ? ` · ${live} in flight`
        : '';
  $('count').textContent = `${rows.children.length} shown${flight}`;
}

function renderPaused() {
  $('pause').textContent = state.paused ? 'Resume' : 'Pause';
  $('pause').classList.toggle('active', state.paused);
  document.body.classList.toggle('paused', state.paused);
}

let loading = 0;
async function load() {
  const mine = ++loading;
  try {
    const { entries } = await api.list(filter(), MAX_ROWS);
    if (mine !== loading) return; // a newer filter's answer wins
    $('filter-error').textContent = '';
    rows.replaceChildren(...entries.map(row));
  } catch (err) {
    $('filter-error').textContent = err.message;
    // A body search waits its turn while others run (the inspector runs a few at a time): ask again.
    if (err.code === 'TUNNEL2_ERR_INSPECTOR_BUSY' && mine === loading) reloadLive(1000);
  }
  renderEmpty();
  renderCount();
}

let reloadTimer;
function planReload(ms) {
  reloadTimer = setTimeout(() => {
    reloadTimer = undefined;
    void load();
  }, ms);
}
/** Typing: every keystroke restarts the wait (debounce), so the list reloads once typing pauses. */
function reloadSoon(ms = 150) {
  clearTimeout(reloadTimer);
  planReload(ms);
}
/** Live entries: a reload already planned is left alone (throttle): a steady stream cannot postpone it. */
function reloadLive(ms = 150) {
  if (reloadTimer === undefined) planReload(ms);
}

function rowOf(id) {
  return $('list').querySelector(`tbody tr[data-id="${CSS.escape(id)}"]`);
}

function select(id, scroll = true) {
  $('list').querySelector('tbody tr.selected')?.classList.remove('selected');
  state.selected = id;
  const tr = id === undefined ? null : rowOf(id);
  tr?.classList.add('selected');
  if (scroll) tr?.scrollIntoView({ block: 'nearest' });
}

async function open(id) {
  select(id);
  state.open = id;
  document.body.classList.add('has-detail');
  if (isLive(id)) {
    showLive();
    return;
  }
  try {
    await showDetail(ctx, id);
  } catch (err) {
    detailPane.replaceChildren(el('p', { class: 'empty' }, `#${id}: ${err.message}`));
  }
}

/** The open in-flight exchange as last polled; once gone without its entry (cleared, evicted), a note. */
function showLive() {
  const exchange = inFlight.get(state.open);
  if (exchange !== undefined) {
    detailPane.replaceChildren(...inFlightView(exchange, close));
    return;
  }
  const note = detailPane.querySelector('.live-note');
  if (note !== null)
    note.textContent = 'This exchange has ended: its entry is in the list (unless capture dropped it).';
}

function close() {
  state.open = undefined;
  document.body.classList.remove('has-detail');
  renderDetailEmpty();
}

function renderDetailEmpty() {
  detailPane.replaceChildren(
    el(
      'div',
      { class: 'empty' },
      el('p', {}, 'Select a request to see its headers and bodies.'),
      el('p', { class: 'muted' }, 'j / k or ↑ / ↓ move · Enter opens · / searches · Esc closes'),
    ),
  );
}

let toastTimer;
function toast(text, bad = false) {
  const box = $('toast');
  box.textContent = text;
  box.classList.toggle('bad', bad);
  box.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => {
    box.hidden = true;
  }, 3000);
}

const ctx = {
  pane: detailPane,
  open,
  close,
  toast,
  redact: () => $('redact').checked,
  tunnelName: () => state.name,
};

function move(step) {
  const all = [...$('list').querySelectorAll('tbody tr[data-id]')];
  if (all.length === 0) return;
  const at = all.findIndex((tr) => tr.dataset.id === state.selected);
  const next = all[Math.max(0, Math.min(all.length - 1, at < 0 ? 0 : at + step))];
  select(next.dataset.id);
}

document.addEventListener('keydown', (e) => {
  const typing = e.target instanceof HTMLElement && e.target.closest('input, textarea, select') !== null;
  if (e.key === 'Escape') {
    if (typing) e.target.blur();
    else close();
    return;
  }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === 'j' || e.key === 'ArrowDown') move(1);
  else if (e.key === 'k' || e.key === 'ArrowUp') move(-1);
  else if (e.key === 'Enter' && state.selected !== undefined) void open(state.selected);
  else if (e.key === '/') FILTERS.path.focus();
  else return;
  e.preventDefault();
});

$('list').addEventListener('click', (e) => {
  const tr = e.target instanceof Element ? e.target.closest('tr[data-id]') : null;
  if (tr !== null) void open(tr.dataset.id);
});

for (const input of Object.values(FILTERS)) {
  input.addEventListener('input', () => {
    inFlight.render();
    reloadSoon();
  });
}
$('filters').addEventListener('submit', (e) => e.preventDefault());

$('pause').addEventListener('click', async () => {
  const { paused } = await api.setPaused(!state.paused);
  state.paused = paused;
  renderPaused();
  renderEmpty();
});

$('clear').addEventListener('click', async () => {
  await api.clear();
  close();
});

function updateHarLink() {
  $('har-all').href = api.harUrl(undefined, $('redact').checked);
  $('har-all').download = harFileName(state.name, undefined);
}
$('redact').addEventListener('change', updateHarLink);
// Named at the moment of the export, as the server names it.
$('har-all').addEventListener('click', updateHarLink);

const inFlight = createInFlight({
  body: $('inflight'),
  filter,
  selected: () => state.selected,
  onChange() {
    renderEmpty();
    renderCount();
    if (isLive(state.open)) showLive();
  },
});

/**
 * The live stream. A dropped one reconnects by itself; a refused one (503: as many streams as the inspector
 * serves are open, other tabs or scripts) is closed for good by the browser, so it is opened again here.
 */
function listen() {
  const events = new EventSource('/api/events');
  events.addEventListener('error', () => {
    if (events.readyState === EventSource.CLOSED) setTimeout(listen, 2000);
  });
  events.addEventListener('entry', (m) => {
    const entry = JSON.parse(m.data);
    // The exchange it ends leaves the in-flight group; a selection or open detail follows it to its entry.
    const liveRow = inFlight.ended(entry);
    if (liveRow !== undefined && state.open === liveRow) void open(entry.id);
    else if (liveRow !== undefined && state.selected === liveRow) state.selected = entry.id;
    // Server-side filters (body text, headers) cannot be checked here: ask the server again.
    if (filtering()) {
      reloadLive();
      return;
    }
    if (rowOf(entry.id) !== null) return;
    rows.prepend(row(entry));
    while (rows.children.length > MAX_ROWS) rows.lastElementChild.remove();
    renderEmpty();
    renderCount();
  });
  events.addEventListener('clear', () => {
    rows.replaceChildren();
    renderEmpty();
    renderCount();
  });
  events.addEventListener('status', (m) => {
    state.paused = JSON.parse(m.data).paused;
    renderPaused();
    renderEmpty();
  });
  // After a reconnect, entries may have been missed: the list is fetched again.
  events.addEventListener('open', () => reloadSoon(0));
}
listen();

async function start() {
  const status = await api.status();
  Object.assign(state, {
    paused: status.paused,
    publicUrl: status.publicUrl,
    target: status.target,
    name: status.name ?? null,
  });
  $('where').replaceChildren(
    status.publicUrl === null
      ? 'connecting…'
      : el('a', { href: status.publicUrl, target: '_blank', rel: 'noreferrer' }, status.publicUrl),
    ' → ',
    el('code', {}, status.target),
    // A replica (--replica): how many agents served the name with this one when it connected.
    ...(typeof status.replicas === 'number' ? [` · ${status.replicas} replicas at connect`] : []),
  );
  renderPaused();
  updateHarLink();
  renderDetailEmpty();
  await load();
  inFlight.start();
}

void start();
