// Pure SVG rendering of the evaluation's time series: one plot, or stacked panels sharing a time axis like the
// figures of a systems paper (p99 latency over throughput), with dashed lines where events happened.

const PALETTE = ['#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#000000'];
const MARGIN = { left: 68, right: 16, top: 26, bottom: 42, bottomWithoutTickLabels: 10 };
const FONT = 'font-family="Helvetica, Arial, sans-serif"';
const CHAR_WIDTH_PX = 6.2; // at 11 px, to keep event labels apart
const FIGURE_TITLE_PX = 30;

export function escapeXml(value) {
  return String(value)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;');
}

function fmt(n) {
  return Number.isInteger(n) ? String(n) : n.toFixed(2).replace(/\.?0+$/, '');
}

// 1, 2 or 5 times a power of ten, so that about `count` ticks cover [min, max].
function niceStep(span, count) {
  const raw = span / Math.max(1, count);
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const fraction = raw / magnitude;
  const nice = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10;
  return nice * magnitude;
}

// A linear axis widened to whole steps: { min, max, ticks }.
export function linearTicks(min, max, count = 5) {
  const lo = Number.isFinite(min) ? min : 0;
  let hi = Number.isFinite(max) ? max : 1;
  // a span too small for distinct ticks (a flat line) is widened by a tenth of its value, or to 1 around 0
  const tinySpan = Math.max(Math.abs(lo) * 1e-6, Math.abs(hi) * 1e-6, 1e-200);
  if (!(hi - lo > tinySpan)) hi = lo + (Math.abs(lo) > 1e-200 ? Math.max(tinySpan, Math.abs(lo) * 0.1) : 1);
  const step = niceStep(hi - lo, count);
  const first = Math.floor(lo / step + 1e-9) * step;
  const last = Math.ceil(hi / step - 1e-9) * step;
  const ticks = [];
  for (let k = 0; first + k * step <= last + step * 1e-9; k += 1) ticks.push(Number((first + k * step).toPrecision(12)));
  return { min: first, max: last, ticks };
}

// A log axis from the power of ten at or below min to the one at or above max: { min, max, ticks }.
export function logTicks(min, max) {
  const lo = Math.floor(Math.log10(Number.isFinite(min) && min > 0 ? min : 1));
  let hi = Math.ceil(Math.log10(Number.isFinite(max) && max > 0 ? max : 10));
  if (hi <= lo) hi = lo + 1;
  const ticks = [];
  for (let e = lo; e <= hi; e += 1) ticks.push(Number((10 ** e).toPrecision(12)));
  return { min: 10 ** lo, max: 10 ** hi, ticks };
}

export function formatTick(value) {
  const abs = Math.abs(value);
  if (abs >= 1e6) return `${fmt(value / 1e6)}M`;
  if (abs >= 1e4) return `${fmt(value / 1e3)}k`;
  return abs > 0 && abs < 0.01 ? value.toExponential(0) : fmt(Number(value.toPrecision(6)));
}

function plottable(v, yLog) {
  return typeof v === 'number' && Number.isFinite(v) && (!yLog || v > 0);
}

// Smallest and largest of the values that pass keep(); a loop, as arrays of points may be long.
function extent(values, keep) {
  let min = Infinity;
  let max = -Infinity;
  for (const v of values) {
    if (!keep(v)) continue;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return { min, max };
}

// The x and y ranges to draw: all points (and events, on x), or the caller's bounds. Linear y starts at 0
// unless a value is negative.
function domains({ series, events = [], yLog = false, xDomain, yMin, yMax }) {
  const xs = extent([...series.flatMap((s) => s.points.map((p) => p.t)), ...events.map((e) => e.t)], Number.isFinite);
  const ys = extent(series.flatMap((s) => s.points.map((p) => p.v)), (v) => plottable(v, yLog));
  const x = xDomain ?? linearTicks(xs.min, xs.max, 8);
  const yLo = yMin ?? (yLog ? ys.min : Math.min(0, ys.min));
  // headroom, so that a flat line at the maximum does not run along the frame
  const yHi = yMax ?? (yLog ? ys.max * 1.5 : ys.max + (ys.max - yLo) * 0.05);
  return { x, y: yLog ? logTicks(yLo, yHi) : linearTicks(yLo, yHi, 5) };
}

function scales(box, x, y, yLog) {
  const toY = yLog ? Math.log10 : (v) => v;
  return {
    px: (t) => box.x + ((t - x.min) / (x.max - x.min)) * box.width,
    py: (v) => box.y + box.height - ((toY(v) - toY(y.min)) / (toY(y.max) - toY(y.min))) * box.height,
  };
}

function renderAxes({ box, x, y, s, xLabel, yLabel, showXTickLabels }) {
  const out = [];
  const bottom = box.y + box.height;
  for (const v of y.ticks) {
    const py = fmt(s.py(v));
    out.push(`<line x1="${fmt(box.x)}" y1="${py}" x2="${fmt(box.x + box.width)}" y2="${py}" stroke="#e3e3e3" stroke-width="1"/>`);
    out.push(`<text x="${fmt(box.x - 6)}" y="${py}" text-anchor="end" dominant-baseline="middle" font-size="11" ${FONT}>${escapeXml(formatTick(v))}</text>`);
  }
  for (const t of x.ticks) {
    const px = fmt(s.px(t));
    out.push(`<line x1="${px}" y1="${fmt(bottom)}" x2="${px}" y2="${fmt(bottom + 4)}" stroke="#000" stroke-width="1"/>`);
    if (showXTickLabels) out.push(`<text x="${px}" y="${fmt(bottom + 16)}" text-anchor="middle" font-size="11" ${FONT}>${escapeXml(formatTick(t))}</text>`);
  }
  out.push(`<rect x="${fmt(box.x)}" y="${fmt(box.y)}" width="${fmt(box.width)}" height="${fmt(box.height)}" fill="none" stroke="#000" stroke-width="1"/>`);
  if (xLabel && showXTickLabels) {
    out.push(`<text x="${fmt(box.x + box.width / 2)}" y="${fmt(bottom + 34)}" text-anchor="middle" font-size="12" ${FONT}>${escapeXml(xLabel)}</text>`);
  }
  if (yLabel) {
    const cx = fmt(box.x - 52);
    const cy = fmt(box.y + box.height / 2);
    out.push(`<text x="${cx}" y="${cy}" transform="rotate(-90 ${cx} ${cy})" text-anchor="middle" font-size="12" ${FONT}>${escapeXml(yLabel)}</text>`);
  }
  return out;
}

// Runs of consecutive plottable points; null, NaN (and v <= 0 on a log axis) leave a gap.
function segments(points, yLog) {
  const runs = [];
  let run = [];
  for (const p of points) {
    if (Number.isFinite(p.t) && plottable(p.v, yLog)) run.push(p);
    else if (run.length > 0) { runs.push(run); run = []; }
  }
  if (run.length > 0) runs.push(run);
  return runs;
}

function renderSeries({ series, s, yLog, clipId }) {
  const out = [`<g clip-path="url(#${escapeXml(clipId)})">`];
  series.forEach((one, index) => {
    const color = escapeXml(one.color ?? PALETTE[index % PALETTE.length]);
    for (const run of segments(one.points, yLog)) {
      if (run.length === 1) {
        out.push(`<circle cx="${fmt(s.px(run[0].t))}" cy="${fmt(s.py(run[0].v))}" r="2" fill="${color}"/>`);
      } else {
        const points = run.map((p) => `${fmt(s.px(p.t))},${fmt(s.py(p.v))}`).join(' ');
        out.push(`<polyline points="${points}" fill="none" stroke="${color}" stroke-width="1.5" stroke-linejoin="round"/>`);
      }
    }
  });
  out.push('</g>');
  return out;
}

// Dashed vertical lines; labels along the top, moved down a row when they would overlap the previous one.
function renderEvents({ events, box, s, showLabels }) {
  const out = [];
  const rowEnds = [];
  for (const event of [...events].sort((a, b) => a.t - b.t)) {
    const px = s.px(event.t);
    if (!(px >= box.x - 0.5 && px <= box.x + box.width + 0.5)) continue;
    out.push(`<line x1="${fmt(px)}" y1="${fmt(box.y)}" x2="${fmt(px)}" y2="${fmt(box.y + box.height)}" stroke="#555" stroke-width="1" stroke-dasharray="4 3"/>`);
    if (!showLabels || !event.label) continue;
    const widthPx = String(event.label).length * CHAR_WIDTH_PX;
    let row = rowEnds.findIndex((end) => end < px);
    if (row === -1) row = rowEnds.length;
    rowEnds[row] = px + 3 + widthPx + 6;
    out.push(`<text x="${fmt(px + 3)}" y="${fmt(box.y + 12 + row * 13)}" font-size="11" fill="#333" ${FONT}>${escapeXml(event.label)}</text>`);
  }
  return out;
}

// A one-line legend in the panel's header, right-aligned, so that it never hides data or event labels.
function renderLegend({ series, box, baselineY }) {
  const items = series.map((one, index) => ({
    color: escapeXml(one.color ?? PALETTE[index % PALETTE.length]),
    label: String(one.label ?? ''),
  }));
  const widths = items.map((item) => 24 + item.label.length * CHAR_WIDTH_PX + 12);
  let left = box.x + box.width - widths.reduce((sum, w) => sum + w, 0);
  const out = [];
  items.forEach((item, index) => {
    out.push(`<line x1="${fmt(left)}" y1="${fmt(baselineY - 4)}" x2="${fmt(left + 18)}" y2="${fmt(baselineY - 4)}" stroke="${item.color}" stroke-width="2"/>`);
    out.push(`<text x="${fmt(left + 22)}" y="${fmt(baselineY)}" font-size="11" ${FONT}>${escapeXml(item.label)}</text>`);
    left += widths[index];
  });
  return out;
}

// One panel's elements inside its area { x, y, width, height } of the page.
function renderPanel(panel, area, { xDomain, showXTickLabels = true, showEventLabels = true, clipId }) {
  const box = {
    x: area.x + MARGIN.left,
    y: area.y + MARGIN.top,
    width: area.width - MARGIN.left - MARGIN.right,
    height: area.height - MARGIN.top - (showXTickLabels ? MARGIN.bottom : MARGIN.bottomWithoutTickLabels),
  };
  const series = panel.series ?? [];
  const { x, y } = domains({ ...panel, series, xDomain });
  const s = scales(box, x, y, panel.yLog);
  return [
    `<clipPath id="${escapeXml(clipId)}"><rect x="${fmt(box.x)}" y="${fmt(box.y)}" width="${fmt(box.width)}" height="${fmt(box.height)}"/></clipPath>`,
    panel.title ? `<text x="${fmt(box.x)}" y="${fmt(area.y + 17)}" font-size="13" font-weight="bold" ${FONT}>${escapeXml(panel.title)}</text>` : '',
    ...renderAxes({ box, x, y, s, xLabel: panel.xLabel, yLabel: panel.yLabel, showXTickLabels }),
    ...renderEvents({ events: panel.events ?? [], box, s, showLabels: showEventLabels }),
    ...renderSeries({ series, s, yLog: panel.yLog, clipId }),
    ...renderLegend({ series, box, baselineY: area.y + 17 }),
  ].filter(Boolean);
}

function svgDocument(width, height, body) {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${fmt(width)}" height="${fmt(height)}" viewBox="0 0 ${fmt(width)} ${fmt(height)}">`,
    `<rect x="0" y="0" width="${fmt(width)}" height="${fmt(height)}" fill="#fff"/>`,
    ...body,
    '</svg>',
  ].join('\n');
}

// One plot: series of { t, v } points over time, a legend, and dashed event lines.
export function renderTimeSeries({
  title, series = [], yLabel, xLabel, events = [], yLog = false, width = 720, height = 300, yMin, yMax, idPrefix = 'ts',
}) {
  const body = renderPanel({ title, series, yLabel, xLabel, events, yLog, yMin, yMax }, { x: 0, y: 0, width, height },
    { clipId: `${idPrefix}-clip-0` });
  return svgDocument(width, height, body);
}

// Bold 15 px characters are about 8.5 px wide: a title longer than the figure is squeezed to fit instead of running
// off both edges (a centred text overflows to the left too).
const TITLE_CHAR_PX = 8.5;
function figureTitle(title, width) {
  const fits = title.length * TITLE_CHAR_PX <= width - 16;
  const squeeze = fits ? '' : ` textLength="${fmt(width - 16)}" lengthAdjust="spacingAndGlyphs"`;
  return `<text x="${fmt(width / 2)}" y="20" text-anchor="middle"${squeeze} font-size="15" font-weight="bold" ${FONT}>${escapeXml(title)}</text>`;
}

// Panels stacked on one time axis (widened to cover them all); tick labels and event labels are drawn once.
export function renderFigure({ title, panels, width = 720, panelHeight = 220, xLabel, idPrefix = 'fig' }) {
  const allSeries = panels.flatMap((panel) => panel.series ?? []);
  const allEvents = panels.flatMap((panel) => panel.events ?? []);
  const { x: xDomain } = domains({ series: allSeries, events: allEvents });
  const top = title ? FIGURE_TITLE_PX : 0;
  const heights = panels.map((panel) => panel.height ?? panelHeight);
  const body = title ? [figureTitle(title, width)] : [];
  let y = top;
  panels.forEach((panel, index) => {
    const last = index === panels.length - 1;
    const area = { x: 0, y, width, height: heights[index] };
    body.push(`<g>`, ...renderPanel({ xLabel, ...panel }, area, {
      xDomain, showXTickLabels: last, showEventLabels: index === 0, clipId: `${idPrefix}-clip-${index}`,
    }), '</g>');
    y += heights[index];
  });
  return svgDocument(width, y, body);
}
