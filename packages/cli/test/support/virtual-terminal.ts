/**
 * Just enough of a VT100 to read what the CLI drew: printable text with wrapping, CR/LF with scrolling
 * inside the scroll region, CUP, CUU, DECSTBM, DECSC/DECRC, EL and ED; SGR and cursor visibility are
 * noted (the colour test asks whether any SGR was sent) but change nothing on the screen.
 */
// Built from strings: the linter refuses control characters in a regex literal.
const ESC = String.fromCharCode(27);
const CSI = new RegExp(`^${ESC}\\[([?0-9;]*)([@-~])`);
const CSI_START = new RegExp(`^${ESC}\\[[?0-9;]*$`);

export class VirtualTerminal {
  screen: string[][];
  row = 0;
  col = 0;
  top = 0;
  bottom: number;
  sgrSeen = 0;
  /** Characters that scrolled out of a region that does not start at the top (lost, as in a real terminal). */
  scrolledOff = 0;
  #saved = { row: 0, col: 0 };
  #pending = '';

  columns: number;
  rows: number;

  constructor(columns: number, rows: number) {
    this.columns = columns;
    this.rows = rows;
    this.screen = Array.from({ length: rows }, () => Array<string>(columns).fill(' '));
    this.bottom = rows - 1;
  }

  /** A resized window, blank: the CLI redraws everything after a resize (reflow is not modelled). */
  resize(columns: number, rows: number): void {
    this.columns = columns;
    this.rows = rows;
    this.screen = Array.from({ length: rows }, () => Array<string>(columns).fill(' '));
    this.top = 0;
    this.bottom = rows - 1;
    this.row = Math.min(this.row, rows - 1);
    this.col = Math.min(this.col, columns - 1);
  }

  /** The screen's rows as text, trailing blanks cut. */
  lines(): string[] {
    return this.screen.map((row) => row.join('').trimEnd());
  }

  feed(text: string): void {
    const input = this.#pending + text;
    this.#pending = '';
    let i = 0;
    while (i < input.length) {
      const ch = input[i]!;
      if (ch === '\x1b') {
        const rest = input.slice(i);
        if (rest.length < 2) {
          this.#pending = rest;
          return;
        }
        if (rest[1] === '7' || rest[1] === '8') {
          if (rest[1] === '7') this.#saved = { row: this.row, col: this.col };
          else ({ row: this.row, col: this.col } = this.#saved);
          i += 2;
          continue;
        }
        const csi = CSI.exec(rest);
        if (csi === null) {
          if (!CSI_START.test(rest)) throw new Error(`unexpected escape ${JSON.stringify(rest.slice(0, 8))}`);
          this.#pending = rest;
          return;
        }
        this.#control(csi[1]!, csi[2]!);
        i += csi[0].length;
        continue;
      }
      if (ch === '\r') this.col = 0;
      else if (ch === '\n') this.#lineFeed();
      else this.#print(ch);
      i++;
    }
  }

  #control(params: string, final: string): void {
    if (params.startsWith('?')) return;
    const n = params.split(';').map((p) => (p === '' ? undefined : Number(p)));
    switch (final) {
      case 'm':
        this.sgrSeen++;
        return;
      case 'H':
        this.row = Math.min((n[0] ?? 1) - 1, this.rows - 1);
        this.col = Math.min((n[1] ?? 1) - 1, this.columns - 1);
        return;
      case 'A':
        this.row = Math.max(this.row - (n[0] ?? 1), 0);
        return;
      case 'r':
        this.top = (n[0] ?? 1) - 1;
        this.bottom = (n[1] ?? this.rows) - 1;
        this.row = 0;
        this.col = 0;
        return;
      case 'K':
        if ((n[0] ?? 0) === 2) this.screen[this.row]!.fill(' ');
        else this.screen[this.row]!.fill(' ', this.col);
        return;
      case 'J':
        if ((n[0] ?? 0) === 2) for (const row of this.screen) row.fill(' ');
        return;
      default:
        throw new Error(`unexpected control ${params}${final}`);
    }
  }

  #print(ch: string): void {
    if (this.col >= this.columns) {
      this.col = 0;
      this.#lineFeed();
    }
    this.screen[this.row]![this.col] = ch;
    this.col++;
  }

  #lineFeed(): void {
    if (this.row === this.bottom) {
      const [gone] = this.screen.splice(this.top, 1);
      if (this.top > 0) this.scrolledOff += gone!.join('').trim().length;
      this.screen.splice(this.bottom, 0, Array<string>(this.columns).fill(' '));
    } else if (this.row < this.rows - 1) this.row++;
  }
}
