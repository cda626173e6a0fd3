// The detail pane of one entry: its heads, query, bodies and error, and the actions on it (replay, edit and
// replay, compare with the original, copy as curl, export HAR).

import { api, harFileName, toBase64 } from './api.js';
import { bodyBytes, bodyText, bodyView } from './body-view.js';
import { el, formatBytes, formatMs, pairTable, statusClass } from './dom.js';
import { lineDiff } from './line-diff.js';
import { hostsView, rawView } from './wire-view.js';

/** `ctx`: { pane, open(id), toast(text), redact(): boolean, tunnelName(): string | null, close() } */
export async function showDetail(ctx, id) {
  const entry = await api.entry(id);
  ctx.pane.replaceChildren(...entryView(ctx, entry));
  ctx.pane.scrollTop = 0;
  return entry;
}

function target(entry) {
  return entry.query === '' ? entry.path : `${entry.path}?${entry.query}`;
}

function section(title, ...children) {
  return el('details', { class: 'section', open: true }, el('summary', {}, title), ...children);
}

function entryView(ctx, entry) {
  const facts = [
    entry.startedAt.replace('T', ' ').replace('Z', ' UTC'),
    formatMs(entry.durationMs),
    entry.ttfbMs === null ? undefined : `first byte ${formatMs(entry.ttfbMs)}`,
    `from ${entry.clientAddress ?? 'unknown'}`,
  ].filter((f) => f !== undefined);
  const actions = el(
    'div',
    { class: 'actions' },
    entry.kind === 'http' &&
      el(
        'button',
        {
          type: 'button',
          'data-action': 'replay',
          onclick: () => replay(ctx, entry),
          // The server refuses it: the kept part sent as if whole would be a request nobody made.
          disabled: entry.requestBody.truncated,
          title: entry.requestBody.truncated
            ? `The body was captured only in part (${entry.requestBody.captured} of ${entry.requestBody.size} bytes): use Edit & replay to send a body`
            : undefined,
        },
        'Replay',
      ),
    entry.kind === 'http' &&
      el(
        'button',
        { type: 'button', 'data-action': 'edit', onclick: () => editForm(ctx, entry) },
        'Edit & replay',
      ),
    entry.replayOf !== undefined &&
      el(
        'button',
        { type: 'button', 'data-action': 'compare', onclick: () => compare(ctx, entry) },
        `Compare with #${entry.replayOf}`,
      ),
    el(
      'button',
      { type: 'button', 'data-action': 'curl', onclick: () => copyCurl(ctx, entry) },
      'Copy as curl',
    ),
    el(
      'a',
      {
        class: 'button',
        'data-action': 'har',
        download: harFileName(ctx.tunnelName(), [entry.id]),
        href: api.harUrl([entry.id], ctx.redact()),
        onclick: (e) => {
          // Named at the moment of the export, as the server names it.
          e.currentTarget.download = harFileName(ctx.tunnelName(), [entry.id]);
          e.currentTarget.href = api.harUrl([entry.id], ctx.redact());
        },
      },
      'HAR',
    ),
    el('button', { type: 'button', class: 'close', title: 'Close (Esc)', onclick: () => ctx.close() }, '✕'),
  );
  const title = el(
    'div',
    { class: 'title' },
    el('span', { class: 'method' }, entry.method),
    el(
      'span',
      { class: `status ${statusClass(entry.status)}` },
      entry.status === 0 ? 'no response' : String(entry.status),
    ),
    el('span', { class: 'target' }, target(entry)),
  );
  const views = [
    title,
    el('p', { class: 'muted facts' }, `#${entry.id} · ${facts.join(' · ')}`),
    hostsView(entry),
    actions,
  ];
  if (entry.replayOf !== undefined) {
    views.push(
      el(
        'p',
        { class: 'note' },
        'Replay of ',
        el(
          'a',
          {
            href: `#${entry.replayOf}`,
            onclick: (e) => {
              e.preventDefault();
              ctx.open(entry.replayOf);
            },
          },
          `#${entry.replayOf}`,
        ),
        ', sent straight to the local target.',
      ),
    );
  }
  if (entry.error !== undefined) {
    views.push(
      el('p', { class: 'error-box' }, el('strong', {}, entry.error.code), ` ${entry.error.message}`),
    );
  }
  views.push(el('div', { id: 'action-area' }));
  if (entry.kind === 'websocket' && entry.ws !== undefined) {
    const ws = entry.ws;
    views.push(
      section(
        'WebSocket',
        pairTable([
          ['duration', formatMs(entry.durationMs)],
          [
            'to the backend',
            `${formatBytes(ws.bytesIn)}${ws.messagesIn === undefined ? '' : ` in ${ws.messagesIn} messages`}`,
          ],
          [
            'from the backend',
            `${formatBytes(ws.bytesOut)}${ws.messagesOut === undefined ? '' : ` in ${ws.messagesOut} messages`}`,
          ],
        ]),
      ),
    );
  }
  const query = entry.query === '' ? [] : [...new URLSearchParams(entry.query)];
  const details = el(
    'div',
    { class: 'view', 'data-view': 'details' },
    section(`Request headers (${entry.requestHeaders.length})`, pairTable(entry.requestHeaders)),
    query.length > 0 && section(`Query (${query.length})`, pairTable(query)),
    section('Request body', bodyView(entry.requestBody)),
    section(`Response headers (${entry.responseHeaders.length})`, pairTable(entry.responseHeaders)),
    section('Response body', bodyView(entry.responseBody)),
  );
  views.push(...viewTabs(entry, details));
  return views.filter(Boolean);
}

/** Details (parsed, rendered by kind) or Raw (the messages as text, fetched when first shown). */
function viewTabs(entry, details) {
  const raw = el('div', { class: 'view', 'data-view': 'raw', hidden: true });
  let rawLoaded = false;
  const tab = (name, label) =>
    el(
      'button',
      {
        type: 'button',
        role: 'tab',
        class: 'tab',
        'data-tab': name,
        'aria-selected': String(name === 'details'),
        onclick: () => show(name),
      },
      label,
    );
  const tabs = el('div', { class: 'tabs', role: 'tablist' }, tab('details', 'Details'), tab('raw', 'Raw'));
  const show = (name) => {
    for (const button of tabs.children)
      button.setAttribute('aria-selected', String(button.dataset.tab === name));
    details.hidden = name !== 'details';
    raw.hidden = name !== 'raw';
    if (name === 'raw' && !rawLoaded) {
      rawLoaded = true;
      rawView(entry).then(
        (parts) => raw.replaceChildren(...parts),
        (err) => {
          rawLoaded = false;
          raw.replaceChildren(el('p', { class: 'error-box' }, `${err.code ?? ''} ${err.message}`));
        },
      );
    }
  };
  return [tabs, details, raw];
}

function area(ctx) {
  return ctx.pane.querySelector('#action-area');
}

async function replay(ctx, entry, edits) {
  ctx.toast(`replaying #${entry.id}…`);
  try {
    const { entry: replayed } = await api.replay(entry.id, edits);
    ctx.toast(`replayed: #${replayed.id} answered ${replayed.status || replayed.error?.code}`);
    await ctx.open(replayed.id);
  } catch (err) {
    ctx.toast(`replay failed: ${err.code ?? ''} ${err.message}`, true);
  }
}

/** Headers as "Name: value" lines, one per line, for the edit form (order and repeats kept). */
function headerLines(headers) {
  return headers.map(([n, v]) => `${n}: ${v}`).join('\n');
}

function parseHeaderLines(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const colon = line.indexOf(':');
    if (colon <= 0) throw new Error(`not a header line: "${line}"`);
    out.push([line.slice(0, colon).trim(), line.slice(colon + 1).trim()]);
  }
  return out;
}

function editForm(ctx, entry) {
  const bytes = bodyBytes(entry.requestBody);
  const decoded = entry.requestBody.decodedBase64 !== undefined;
  // A decoded body is edited as its plain text, so its Content-Encoding no longer applies.
  const headers = entry.requestHeaders.filter(([n]) => !(decoded && n.toLowerCase() === 'content-encoding'));
  const method = el('input', { id: 'edit-method', value: entry.method, size: 8, 'aria-label': 'method' });
  const path = el('input', { id: 'edit-path', value: target(entry), 'aria-label': 'path' });
  const headersBox = el('textarea', {
    id: 'edit-headers',
    rows: Math.min(12, headers.length + 1),
    'aria-label': 'headers',
  });
  headersBox.value = headerLines(headers);
  const bodyBox = el('textarea', { id: 'edit-body', rows: 8, 'aria-label': 'body' });
  bodyBox.value = new TextDecoder().decode(bytes);
  // Binary bytes do not survive the round trip through text (they become U+FFFD): untouched, the body is
  // sent as the bytes shown (decoded when it was, as its Content-Encoding is left out above).
  const shownText = bodyBox.value;
  const problem = el('p', { class: 'error-text' });
  const cut = entry.requestBody.truncated
    ? el(
        'p',
        { class: 'note' },
        `The body was captured only in part (${entry.requestBody.captured} of ${entry.requestBody.size} bytes): left as is, only that part is sent.`,
      )
    : undefined;
  const form = el(
    'form',
    {
      class: 'edit',
      onsubmit: (e) => {
        e.preventDefault();
        let edited;
        try {
          edited = parseHeaderLines(headersBox.value);
        } catch (err) {
          problem.textContent = err.message;
          return;
        }
        void replay(ctx, entry, {
          method: method.value.trim(),
          path: path.value.trim(),
          headers: edited,
          bodyBase64: toBase64(bodyBox.value === shownText ? bytes : new TextEncoder().encode(bodyBox.value)),
        });
      },
    },
    el('div', { class: 'row' }, method, path),
    el('label', {}, 'Headers (one "Name: value" per line)'),
    headersBox,
    el('label', {}, 'Body'),
    cut,
    bodyBox,
    problem,
    el(
      'div',
      { class: 'row' },
      el('button', { type: 'submit', id: 'edit-send', class: 'primary' }, 'Send to the local target'),
      el('button', { type: 'button', onclick: () => area(ctx).replaceChildren() }, 'Cancel'),
    ),
  );
  area(ctx).replaceChildren(form);
  method.focus();
}

function diffView(a, b) {
  const pre = el('pre', { class: 'code diff' });
  for (const { op, line } of lineDiff(a, b)) {
    pre.append(el('span', { class: op === '+' ? 'add' : op === '-' ? 'del' : 'same' }, `${op} ${line}\n`));
  }
  return pre;
}

async function compare(ctx, entry) {
  let original;
  try {
    original = await api.entry(entry.replayOf);
  } catch (err) {
    ctx.toast(`the original #${entry.replayOf} is gone (${err.code})`, true);
    return;
  }
  const same = original.status === entry.status;
  const heads = (e) =>
    e.responseHeaders
      .filter(([n]) => n.toLowerCase() !== 'date')
      .map(([n, v]) => `${n}: ${v}`)
      .join('\n');
  area(ctx).replaceChildren(
    el(
      'div',
      { class: 'compare' },
      el('h3', {}, `Response of #${original.id} (original, −) against #${entry.id} (replay, +)`),
      el(
        'p',
        {},
        'Status ',
        el('span', { class: `status ${statusClass(original.status)}` }, String(original.status)),
        ' → ',
        el('span', { class: `status ${statusClass(entry.status)}` }, String(entry.status)),
        same ? ' (same)' : ' (changed)',
      ),
      el('h4', {}, 'Headers (Date left out)'),
      diffView(heads(original), heads(entry)),
      el('h4', {}, 'Body'),
      diffView(bodyText(original.responseBody), bodyText(entry.responseBody)),
    ),
  );
}

async function copyCurl(ctx, entry) {
  const text = await api.curl(entry.id);
  let copied = false;
  try {
    await navigator.clipboard.writeText(text);
    copied = true;
  } catch {
    // No clipboard permission (plain http, a headless browser): the old way, through a selected textarea.
    const box = el('textarea', { class: 'offscreen' });
    box.value = text;
    document.body.append(box);
    box.select();
    copied = document.execCommand('copy');
    box.remove();
  }
  const shown = el('textarea', { class: 'curl', readonly: true, rows: 6, 'aria-label': 'curl command' });
  shown.value = text;
  area(ctx).replaceChildren(
    el('p', { class: 'muted' }, copied ? 'Copied to the clipboard:' : 'Copy this command:'),
    shown,
  );
  if (!copied) shown.select();
  ctx.toast(copied ? 'curl command copied' : 'select and copy the command below');
}
