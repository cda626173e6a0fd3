/**
 * The last lines the terminal view wrote below its header (request lines, and what it said on stderr), to
 * draw them again after a resize: the screen is cleared then, since a terminal that reflows would otherwise
 * leave pieces of the old, wider header among them, and a user must not lose the requests they were reading.
 */
export interface LogTail {
  /** One or more whole lines, each ending in a newline, as written to the terminal. */
  add(text: string): void;
  /** The latest lines that fit in `rows` rows of `columns` columns (a long line wraps), as one text. */
  last(rows: number, columns: number): string;
}

// Built from a string: the linter refuses control characters in a regex literal.
const SGR = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');

/** `maxLines`: the most kept (a terminal taller than that shows fewer again after a resize). */
export function createLogTail(maxLines = 500): LogTail {
  let lines: string[] = [];
  return {
    add(text) {
      const parts = text.split('\n');
      // The text ends in a newline: its last part is empty.
      parts.pop();
      lines.push(...parts);
      // Trimmed in batches: one copy per maxLines lines, not one per line.
      if (lines.length > 2 * maxLines) lines = lines.slice(-maxLines);
    },
    last(rows, columns) {
      const width = Math.max(columns, 1);
      let used = 0;
      let first = lines.length;
      while (first > 0) {
        const shown = Array.from((lines[first - 1] ?? '').replace(SGR, '')).length;
        const height = Math.max(1, Math.ceil(shown / width));
        if (used + height > rows) break;
        used += height;
        first--;
      }
      return lines
        .slice(first)
        .map((line) => `${line}\n`)
        .join('');
    },
  };
}
