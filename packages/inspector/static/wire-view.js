// The entry as it crossed the wire: the Host each side of the agent saw, and the Raw tab (each message as
// HTTP/1.1 text, GET /api/entries/:id/raw).

import { api } from './api.js';
import { el } from './dom.js';

/**
 * The Host the public client sent and the one your backend received, both labelled when they differ
 * (--host-header rewrite or a value), once with a note when they are the same (preserve).
 */
export function hostsView(entry) {
  const hosts = entry.hosts;
  if (hosts === undefined || (hosts.public === null && hosts.backend === null)) return undefined;
  const shown = (host) => host ?? '(none)';
  if (entry.replayOf !== undefined) {
    // A replay went from here straight to the local target: no public client, one Host.
    return el(
      'table',
      { class: 'pairs hosts' },
      el(
        'tbody',
        {},
        el(
          'tr',
          { 'data-host': 'backend' },
          el('th', {}, 'Host (sent to your backend)'),
          el('td', {}, shown(hosts.backend)),
        ),
      ),
    );
  }
  if (hosts.public === hosts.backend) {
    return el(
      'table',
      { class: 'pairs hosts' },
      el(
        'tbody',
        {},
        el(
          'tr',
          { 'data-host': 'both' },
          el('th', {}, 'Host'),
          el(
            'td',
            {},
            shown(hosts.public),
            el(
              'span',
              { class: 'muted note-inline' },
              ' sent by the public client and passed to your backend as is',
            ),
          ),
        ),
      ),
    );
  }
  return el(
    'table',
    { class: 'pairs hosts' },
    el(
      'tbody',
      {},
      el(
        'tr',
        { 'data-host': 'public' },
        el('th', {}, 'Host (public client)'),
        el('td', {}, shown(hosts.public)),
      ),
      el(
        'tr',
        { 'data-host': 'backend' },
        el('th', {}, 'Host (sent to your backend)'),
        el('td', {}, shown(hosts.backend)),
      ),
    ),
  );
}

function rawMessage(title, message) {
  if (message === null) {
    return el(
      'section',
      { class: 'raw-message' },
      el('h3', {}, title),
      el('p', { class: 'muted' }, 'No response head came.'),
    );
  }
  return el(
    'section',
    { class: 'raw-message' },
    el('h3', {}, title, el('span', { class: 'muted hop' }, ` ${message.hop}`)),
    el('pre', { class: 'raw' }, message.head, message.body ?? ''),
    message.bodyNote !== null && el('p', { class: 'note raw-note' }, message.bodyNote),
  );
}

/** The Raw tab's content, fetched when first shown. */
export async function rawView(entry) {
  const raw = await api.raw(entry.id);
  return [rawMessage('Request', raw.request), rawMessage('Response', raw.response)];
}
