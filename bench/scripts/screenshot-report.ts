// Renders a report.html in headless Chromium and saves a full-page PNG, to check the charts by eye:
//   node bench/scripts/screenshot-report.ts bench/results/<run>/report.html [out.png]
// Uses Debian's chromium (apt-get install -y chromium); set CHROMIUM to use another binary.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const [input, output] = process.argv.slice(2);
if (input === undefined) {
  process.stderr.write('usage: node bench/scripts/screenshot-report.ts <report.html> [out.png]\n');
  process.exit(2);
}
const executablePath = process.env.CHROMIUM ?? '/usr/bin/chromium';
if (!existsSync(executablePath)) {
  process.stderr.write(`no browser at ${executablePath}: apt-get install -y chromium (or set CHROMIUM)\n`);
  process.exit(1);
}
const png = resolve(output ?? input.replace(/\.html$/, '.png'));
const browser = await chromium.launch({
  executablePath,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  // A report must not fetch anything: every request but the file itself is counted and refused.
  const external: string[] = [];
  await page.route('**/*', (route) => {
    if (route.request().url().startsWith('file:')) return route.continue();
    external.push(route.request().url());
    return route.abort();
  });
  await page.goto(pathToFileURL(resolve(input)).href);
  const charts = await page.locator('svg.chart').count();
  const drawn = await page.locator('svg.chart path, svg.chart rect').count();
  await page.screenshot({ path: png, fullPage: true });
  process.stdout.write(
    `${png}: ${charts} charts, ${drawn} drawn marks, ${external.length} external requests\n`,
  );
  if (charts === 0 || drawn === 0 || external.length > 0) process.exitCode = 1;
} finally {
  await browser.close();
}
