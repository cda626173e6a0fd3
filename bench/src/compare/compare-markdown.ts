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

function mdTable(table: Table): string {
  // Names come from the reports (data, perhaps hostile): a pipe or a line break would break the table,
  // and `<` could open an HTML comment that hides the rest of a pull request comment.
  const cell = (text: string): string =>
    text
      .replace(/[\r\n]+/g, ' ')
      .replace(/\|/g, '\\|')
      .replace(/</g, '&lt;');
  return [
    `| ${table.header.map(cell).join(' | ')} |`,
    `| ${table.header.map(() => '---').join(' | ')} |`,
    ...table.rows.map((row) => `| ${row.map(cell).join(' | ')} |`),
  ].join('\n');
}

/** A line of report text in Markdown: one line, no HTML. */
const inline = (text: string): string => text.replace(/[\r\n]+/g, ' ').replace(/</g, '&lt;');

/** compare.md: the verdict, the regressions, every figure beyond the noise, then every figure shared. */
export function renderCompareMarkdown(c: Comparison): string {
  const beyond = c.figures.filter((f) => f.beyondNoise && f.mark !== 'regression');
  const parts = [
    `# tunnel2 bench compare: ${inline(c.scenario)}`,
    sourceLines(c).map(inline).join('  \n'),
    `**${inline(verdictLine(c))}**`,
    countsLine(c),
  ];
  const differences = differencesLine(c);
  if (differences !== null) parts.push(`_${differences.replace(/[\\`*_<>[\]|]/g, '\\$&')}_`);
  for (const warning of warningLines(c)) parts.push(`⚠ ${inline(warning)}`);
  if (c.regressions.length > 0) parts.push('## Regressions', mdTable(figureTable(c.regressions)));
  if (beyond.length > 0) parts.push('## Changed beyond the noise', mdTable(figureTable(beyond)));
  parts.push(
    '## Every figure',
    `<details><summary>${c.figures.length} figures</summary>\n\n${mdTable(figureTable(c.figures))}\n\n</details>`,
    `_${ruleText(c)}_`,
  );
  return `${parts.join('\n\n')}\n`;
}
