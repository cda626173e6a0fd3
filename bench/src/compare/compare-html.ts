import {
  countsLine,
  differencesLine,
  figureTable,
  ruleText,
  sourceLines,
  type Table,
  verdictLine,
  warningLines,
} from './compare-tables.js';
import type { Comparison } from './comparison.js';

function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

function htmlTable(table: Table): string {
  const head = table.header.map((h) => `<th>${escapeXml(h)}</th>`).join('');
  const body = table.rows
    .map((row) => `<tr>${row.map((cell) => `<td>${escapeXml(cell)}</td>`).join('')}</tr>`)
    .join('\n');
  return `<div class="scroll"><table><thead><tr>${head}</tr></thead><tbody>\n${body}\n</tbody></table></div>`;
}

/** compare.html: the same as compare.md in one self-contained page (no script, nothing fetched). */
export function renderCompareHtml(c: Comparison): string {
  const beyond = c.figures.filter((f) => f.beyondNoise && f.mark !== 'regression');
  const section = (title: string, body: string): string => `<h2>${escapeXml(title)}</h2>\n${body}`;
  const body = [
    `<h1>tunnel2 bench compare: ${escapeXml(c.scenario)}</h1>`,
    `<p>${sourceLines(c).map(escapeXml).join('<br>')}</p>`,
    `<p class="${c.passed ? 'passed' : 'failed'}"><strong>${escapeXml(verdictLine(c))}</strong></p>`,
    `<p>${escapeXml(countsLine(c))}</p>`,
    differencesLine(c) === null ? '' : `<p class="rule">${escapeXml(differencesLine(c) ?? '')}</p>`,
    ...warningLines(c).map((w) => `<p class="failed">⚠ ${escapeXml(w)}</p>`),
    c.regressions.length > 0 ? section('Regressions', htmlTable(figureTable(c.regressions))) : '',
    beyond.length > 0 ? section('Changed beyond the noise', htmlTable(figureTable(beyond))) : '',
    section('Every figure', htmlTable(figureTable(c.figures))),
    `<p class="rule">${escapeXml(ruleText(c))}</p>`,
  ].filter((part) => part !== '');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tunnel2 bench compare: ${escapeXml(c.scenario)}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #1a202c; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #cbd5e0; padding: 0.25em 0.6em; text-align: right; }
td:first-child, th:first-child { text-align: left; font-family: ui-monospace, monospace; }
.scroll { overflow-x: auto; }
.passed { color: #276749; } .failed { color: #c53030; } .rule { color: #4a5568; max-width: 60em; }
</style></head>
<body>
${body.join('\n')}
</body></html>
`;
}
