/** Inline SVG charts for report.html: no script, no CDN, readable in any browser and in a saved artifact. */

export interface Series {
  name: string;
  color: string;
  /** One value per x label; null leaves a gap. */
  values: (number | null)[];
  dashed?: boolean;
}

export interface ChartOptions {
  title: string;
  xLabels: string[];
  series: Series[];
  yLabel: string;
  /** Logarithmic y axis: latencies span 0.1 ms to seconds. */
  log?: boolean;
  width?: number;
  height?: number;
  /** Draw a marker (with a tooltip) on every point; default true. Off for long series, where they crowd. */
  markers?: boolean;
}

const MARGIN = { top: 36, right: 16, bottom: 40, left: 64 };
/** One legend row: the legend wraps under the x labels, and the plot shrinks by its height. */
const LEGEND_ROW = 18;
/** More x labels than this and only every k-th is printed (k a 1-2-5 step), so they do not overlap. */
const MAX_X_LABELS = 16;

export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function formatTick(value: number): string {
  if (value === 0) return '0';
  if (Math.abs(value) >= 10_000) return `${Math.round(value / 1000)}k`;
  if (Math.abs(value) >= 1000) return `${(value / 1000).toFixed(1).replace(/\.0$/, '')}k`;
  if (Math.abs(value) >= 1) return String(Math.round(value * 10) / 10);
  return String(Number(value.toPrecision(2)));
}

interface Scale {
  y(value: number): number;
  ticks: number[];
}

function linearScale(max: number, top: number, bottom: number): Scale {
  const raw = max <= 0 ? 1 : max * 1.1;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => raw / s <= 6) ?? magnitude * 10;
  const niceMax = Math.ceil(raw / step) * step;
  const ticks: number[] = [];
  for (let t = 0; t <= niceMax + step / 2; t += step) ticks.push(Number(t.toPrecision(12)));
  return { y: (v) => bottom - (v / niceMax) * (bottom - top), ticks };
}

function logScale(min: number, max: number, top: number, bottom: number): Scale {
  const lo = Math.floor(Math.log10(Math.max(min, 1e-3)));
  const hi = Math.max(lo + 1, Math.ceil(Math.log10(Math.max(max, 1e-3))));
  const ticks: number[] = [];
  for (let e = lo; e <= hi; e++) {
    for (const m of [1, 2, 5]) {
      const t = m * 10 ** e;
      if (t >= 10 ** lo && t <= 10 ** hi) ticks.push(Number(t.toPrecision(6)));
    }
  }
  const span = hi - lo;
  return {
    y: (v) => bottom - ((Math.log10(Math.max(v, 10 ** lo)) - lo) / span) * (bottom - top),
    ticks,
  };
}

/** A series with at least one finite value: only those are drawn and named in the legend. */
function hasData(series: Series): boolean {
  return series.values.some((v) => v !== null && Number.isFinite(v));
}

interface LegendItem {
  series: Series;
  x: number;
  row: number;
}

/** Legend entries laid out left to right, wrapping to a new row at the chart's right edge. */
function legendLayout(options: ChartOptions): { items: LegendItem[]; rows: number } {
  const width = options.width ?? 720;
  const items: LegendItem[] = [];
  let x = MARGIN.left;
  let row = 0;
  for (const s of options.series) {
    const itemWidth = 30 + s.name.length * 6.5;
    if (x + itemWidth > width - MARGIN.right && x > MARGIN.left) {
      row += 1;
      x = MARGIN.left;
    }
    items.push({ series: s, x, row });
    x += itemWidth;
  }
  return { items, rows: items.length === 0 ? 0 : row + 1 };
}

/** Every k-th x label is printed, k the least of 1, 2, 5, 10, 20, 50, ... that keeps them at MAX_X_LABELS. */
export function labelStep(count: number): number {
  for (let magnitude = 1; ; magnitude *= 10) {
    for (const m of [1, 2, 5]) {
      if (Math.ceil(count / (m * magnitude)) <= MAX_X_LABELS) return m * magnitude;
    }
  }
}

function frame(
  options: ChartOptions,
  scale: Scale,
  plot: { left: number; right: number; top: number; bottom: number },
): string {
  const width = options.width ?? 720;
  const height = options.height ?? 320;
  const parts: string[] = [];
  parts.push(
    `<text x="${width / 2}" y="20" text-anchor="middle" class="chart-title">${escapeXml(options.title)}</text>`,
  );
  for (const tick of scale.ticks) {
    const y = scale.y(tick);
    parts.push(`<line x1="${plot.left}" x2="${plot.right}" y1="${y}" y2="${y}" class="grid"/>`);
    parts.push(
      `<text x="${plot.left - 6}" y="${y + 4}" text-anchor="end" class="tick">${formatTick(tick)}</text>`,
    );
  }
  parts.push(
    `<text transform="translate(14 ${(plot.top + plot.bottom) / 2}) rotate(-90)" text-anchor="middle" class="axis">${escapeXml(options.yLabel)}</text>`,
  );
  parts.push(
    `<line x1="${plot.left}" x2="${plot.right}" y1="${plot.bottom}" y2="${plot.bottom}" class="axis-line"/>`,
  );
  // The legend sits under the x labels, one entry per series that has data, wrapping onto more rows.
  const legend = legendLayout(options);
  for (const { series: s, x, row } of legend.items) {
    const y = height - 10 - (legend.rows - 1 - row) * LEGEND_ROW;
    const dash = s.dashed ? ' stroke-dasharray="5 3"' : '';
    parts.push(
      `<line x1="${x}" x2="${x + 18}" y1="${y}" y2="${y}" stroke="${s.color}" stroke-width="3"${dash}/>`,
    );
    parts.push(`<text x="${x + 22}" y="${y + 4}" class="legend">${escapeXml(s.name)}</text>`);
  }
  return parts.join('');
}

function svg(options: ChartOptions, body: string): string {
  const width = options.width ?? 720;
  const height = options.height ?? 320;
  // Scales with its container (width 100 %, height from the viewBox's aspect ratio): the page's CSS lays
  // charts out in columns as wide as the window allows, so the text stays near its designed size.
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 ${width} ${height}" width="100%" preserveAspectRatio="xMidYMid meet" role="img" aria-label="${escapeXml(options.title)}">` +
    `${body}</svg>`
  );
}

/** The chart's options with the series that have no data left out (they would only add a legend entry). */
function withData(options: ChartOptions): ChartOptions {
  return { ...options, series: options.series.filter(hasData) };
}

function plotArea(options: ChartOptions) {
  const width = options.width ?? 720;
  const height = options.height ?? 320;
  const legendRows = Math.max(1, legendLayout(options).rows);
  return {
    left: MARGIN.left,
    right: width - MARGIN.right,
    top: MARGIN.top,
    bottom: height - MARGIN.bottom - legendRows * LEGEND_ROW,
  };
}

function scaleFor(options: ChartOptions, top: number, bottom: number): Scale {
  const values = options.series
    .flatMap((s) => s.values)
    .filter((v): v is number => v !== null && Number.isFinite(v));
  const max = values.length === 0 ? 1 : Math.max(...values);
  if (options.log) {
    const positive = values.filter((v) => v > 0);
    return logScale(positive.length === 0 ? 0.1 : Math.min(...positive), max, top, bottom);
  }
  return linearScale(max, top, bottom);
}

/** One line per series over categorical x labels, with a marker and a tooltip on every point. */
export function lineChart(chart: ChartOptions): string {
  const options = withData(chart);
  const plot = plotArea(options);
  const scale = scaleFor(options, plot.top, plot.bottom);
  const n = options.xLabels.length;
  const step = (plot.right - plot.left) / Math.max(1, n);
  const xAt = (i: number): number => plot.left + step * (i + 0.5);
  const parts: string[] = [frame(options, scale, plot)];
  const every = labelStep(n);
  options.xLabels.forEach((label, i) => {
    if (i % every !== 0) return;
    parts.push(
      `<text x="${xAt(i)}" y="${plot.bottom + 16}" text-anchor="middle" class="tick">${escapeXml(label)}</text>`,
    );
  });
  for (const s of options.series) {
    const dash = s.dashed ? ' stroke-dasharray="5 3"' : '';
    let path = '';
    s.values.forEach((v, i) => {
      if (v === null) return;
      path += `${path === '' || s.values[i - 1] === null ? 'M' : 'L'}${xAt(i).toFixed(1)} ${scale.y(v).toFixed(1)} `;
    });
    if (path !== '') {
      parts.push(`<path d="${path.trim()}" fill="none" stroke="${s.color}" stroke-width="2"${dash}/>`);
    }
    s.values.forEach((v, i) => {
      if (v === null || options.markers === false) return;
      parts.push(
        `<circle cx="${xAt(i).toFixed(1)}" cy="${scale.y(v).toFixed(1)}" r="3.5" fill="${s.color}">` +
          `<title>${escapeXml(`${s.name} @ ${options.xLabels[i]}: ${formatTick(v)} ${options.yLabel}`)}</title></circle>`,
      );
    });
  }
  return svg(options, parts.join(''));
}

/** Grouped bars: one group per x label, one bar per series. */
export function barChart(chart: ChartOptions): string {
  const options = withData(chart);
  const plot = plotArea(options);
  const scale = scaleFor(options, plot.top, plot.bottom);
  const n = options.xLabels.length;
  const groupWidth = (plot.right - plot.left) / Math.max(1, n);
  const barWidth = (groupWidth * 0.8) / Math.max(1, options.series.length);
  const parts: string[] = [frame(options, scale, plot)];
  options.xLabels.forEach((label, i) => {
    const groupLeft = plot.left + groupWidth * i + groupWidth * 0.1;
    parts.push(
      `<text x="${plot.left + groupWidth * (i + 0.5)}" y="${plot.bottom + 16}" text-anchor="middle" class="tick">${escapeXml(label)}</text>`,
    );
    options.series.forEach((s, j) => {
      const v = s.values[i];
      if (v === null || v === undefined) return;
      const y = scale.y(v);
      const stroke = s.dashed ? ` fill-opacity="0.15" stroke="${s.color}" stroke-dasharray="4 2"` : '';
      parts.push(
        `<rect x="${(groupLeft + barWidth * j).toFixed(1)}" y="${y.toFixed(1)}" width="${(barWidth - 2).toFixed(1)}" height="${Math.max(0, plot.bottom - y).toFixed(1)}" fill="${s.color}"${stroke}>` +
          `<title>${escapeXml(`${s.name} @ ${label}: ${formatTick(v)} ${options.yLabel}`)}</title></rect>`,
      );
    });
  });
  return svg(options, parts.join(''));
}
