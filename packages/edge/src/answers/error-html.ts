import type { ErrorFacts } from './error-facts.js';

/**
 * The error page a browser sees: one self-contained document, inline CSS (light and dark), no script, no
 * image, no font, nothing fetched, so it renders under `default-src 'none'`. Every value that comes from
 * the request or a message is escaped; the page has no other input.
 */

const ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Text made safe for HTML element content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

/** A value from the request, cut to what a page needs to show (a Host, a request id). */
function clip(text: string, max = 100): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/** Backquoted spans in a hint (`tunnel2 http 3000`) become <code>; the rest is escaped text. */
function withCode(text: string): string {
  return text
    .split('`')
    .map((part, i) => (i % 2 === 1 ? `<code>${escapeHtml(part)}</code>` : escapeHtml(part)))
    .join('');
}

const STYLE = `
:root{color-scheme:light dark;--bg:#f7f7f8;--fg:#1b1b1f;--muted:#5d5d66;--card:#fff;--line:#e2e2e6;--accent:#c2410c;--code:#f0f0f3}
@media (prefers-color-scheme:dark){:root{--bg:#121214;--fg:#ececf1;--muted:#a1a1ab;--card:#1c1c20;--line:#2e2e35;--accent:#fb923c;--code:#26262c}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:40rem;margin:8vh auto;padding:0 1.25rem}
.card{background:var(--card);border:1px solid var(--line);border-radius:12px;padding:1.75rem 2rem}
.status{color:var(--accent);font-weight:600;letter-spacing:.02em;margin:0}
h1{font-size:1.6rem;line-height:1.25;margin:.25rem 0 1rem}
p{margin:.5rem 0}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.35rem 1rem;margin:1.25rem 0;padding:1rem 0;border-top:1px solid var(--line);border-bottom:1px solid var(--line)}
dt{color:var(--muted)}
dd{margin:0;overflow-wrap:anywhere}
code{font:.9em ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:var(--code);padding:.1em .35em;border-radius:4px}
h2{font-size:1rem;margin:1.25rem 0 .25rem}
footer{color:var(--muted);font-size:.85rem;margin-top:1rem;text-align:center}
`
  .trim()
  .replace(/\n/g, '');

/** The `where` line: the part of the path the failure happened in, in a reader's words. */
function whereText(facts: ErrorFacts): string {
  switch (facts.where) {
    case 'backend':
      return facts.target === undefined ? 'your local server' : `your local server at ${facts.target}`;
    case 'agent':
      return 'the tunnel2 agent (tunnel2 http) that serves this URL';
    default:
      return facts.host === undefined ? 'the tunnel2 edge' : `the tunnel2 edge (${clip(facts.host)})`;
  }
}

/** The whole document for `facts`. */
export function renderErrorHtml(facts: ErrorFacts): string {
  const title = `${facts.status} ${facts.title}`;
  const rows = [
    ['Where', escapeHtml(whereText(facts))],
    ['Code', `<code>${escapeHtml(facts.code)}</code>`],
  ];
  if (facts.requestId !== undefined)
    rows.push(['Request ID', `<code>${escapeHtml(clip(facts.requestId, 128))}</code>`]);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex">
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<main>
<div class="card">
<p class="status">Error ${facts.status}</p>
<h1>${escapeHtml(facts.title)}</h1>
<p id="message">${escapeHtml(facts.message)}</p>
<dl>
${rows.map(([name, value]) => `<dt>${name}</dt><dd>${value}</dd>`).join('\n')}
</dl>
<h2>What to do</h2>
<p id="hint">${withCode(facts.hint)}</p>
</div>
<footer>tunnel2</footer>
</main>
</body>
</html>
`;
}
