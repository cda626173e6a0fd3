// Placeholder page script: the list, live through /api/events. Uses only the public API.
const rows = document.getElementById('entries');

function row(e) {
  const tr = document.createElement('tr');
  for (const v of [
    e.id,
    e.startedAt.slice(11, 19),
    e.method,
    e.path + (e.query ? `?${e.query}` : ''),
    e.status || '---',
    e.durationMs,
  ]) {
    const td = document.createElement('td');
    td.textContent = String(v);
    tr.append(td);
  }
  return tr;
}

async function load() {
  const status = await (await fetch('/api/status')).json();
  document.getElementById('status').textContent = `${status.publicUrl ?? ''} → ${status.target}`;
  const { entries } = await (await fetch('/api/entries?limit=100')).json();
  rows.replaceChildren(...entries.map(row));
}

const events = new EventSource('/api/events');
events.addEventListener('entry', (m) => rows.prepend(row(JSON.parse(m.data))));
events.addEventListener('clear', () => rows.replaceChildren());
load();
