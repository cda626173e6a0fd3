import { Counter, type Registry } from 'prom-client';

/**
 * A counter read at scrape time from totals something else keeps: reset, then one series per key of what
 * `read` returns, that key as the value of `label`. Nothing runs between scrapes.
 */
export function countFrom<K extends string>(
  registry: Registry,
  name: string,
  help: string,
  label: string,
  read: () => Readonly<Record<K, number>>,
): void {
  new Counter({
    name,
    help,
    labelNames: [label],
    registers: [registry],
    collect() {
      this.reset();
      for (const [value, n] of Object.entries<number>(read())) this.inc({ [label]: value }, n);
    },
  });
}
