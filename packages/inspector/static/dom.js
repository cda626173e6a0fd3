// The one DOM helper: builds elements with text nodes only (never innerHTML), so captured data cannot inject markup.

/** `el('td', { class: 'num' }, 'text', child)`; attributes starting with `on` become listeners. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false || value === null) continue;
    if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(typeof child === 'string' || typeof child === 'number' ? String(child) : child);
  }
  return node;
}

export function formatBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

export function formatMs(ms) {
  if (ms < 1) return '<1 ms';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

/** A status's colour class: s2 (2xx) .. s5, s0 for none (failed before a response). */
export function statusClass(status) {
  return status >= 100 && status < 600 ? `s${Math.floor(status / 100)}` : 's0';
}

/** The list's path cell: badges (WebSocket, replay of #n), then path and query. */
export function pathCell(e) {
  return el(
    'td',
    { class: 'path' },
    e.kind === 'websocket' && el('span', { class: 'badge' }, 'WS'),
    e.replayOf !== undefined &&
      el('span', { class: 'badge replay', title: `replay of #${e.replayOf}` }, `↻ #${e.replayOf}`),
    e.query === '' ? e.path : `${e.path}?${e.query}`,
  );
}

/** A name/value table (headers in their order with repeats, query parameters, form fields). */
export function pairTable(pairs, className = 'pairs') {
  return el(
    'table',
    { class: className },
    el(
      'tbody',
      {},
      pairs.map(([name, value]) => el('tr', {}, el('th', {}, name), el('td', {}, value))),
    ),
  );
}
