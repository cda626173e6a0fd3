// Settings are given in milliseconds and bytes (what a file or a variable takes); people read them in
// larger units. Exact where the value is a whole number of a unit, which every default is.

const durationUnits: Array<[ms: number, unit: string, minimum: number]> = [
  [86_400_000, 'days', 2],
  [3_600_000, 'h', 2],
  [60_000, 'min', 2],
  [1_000, 's', 1],
];

/** 60000 → "60 s", 300000 → "5 min", 2592000000 → "30 days", 250 → "250 ms", 1500 → "1.5 s". */
export function humanDuration(ms: number): string {
  if (ms === 0) return '0';
  for (const [size, unit, minimum] of durationUnits) {
    if (ms % size === 0 && ms / size >= minimum) return `${ms / size} ${unit}`;
  }
  return ms >= 1_000 ? `${round(ms / 1_000)} s` : `${ms} ms`;
}

const byteUnits: Array<[bytes: number, unit: string]> = [
  [2 ** 50, 'PiB'],
  [2 ** 40, 'TiB'],
  [2 ** 30, 'GiB'],
  [2 ** 20, 'MiB'],
  [2 ** 10, 'KiB'],
];

/** 16777216 → "16 MiB", 16777215 → "16 MiB - 1 B", 1536 → "1.5 KiB", 100 → "100 B". */
export function humanBytes(bytes: number): string {
  if (bytes === 0) return '0';
  for (const [size, unit] of byteUnits) {
    if (bytes % size === 0) return `${bytes / size} ${unit}`;
    // A limit one below a power of two (a 31-bit window, a 24-bit frame length).
    if ((bytes + 1) % size === 0 && bytes + 1 >= size) return `${(bytes + 1) / size} ${unit} - 1 B`;
  }
  for (const [size, unit] of byteUnits) if (bytes >= size) return `${round(bytes / size)} ${unit}`;
  return `${bytes} B`;
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}
