// The evaluation's SVG figures: well-formed XML, escaped text, axes, legend, gaps and event lines.

import fc from 'fast-check';
import {
  escapeXml, formatTick, linearTicks, logTicks, renderFigure, renderTimeSeries,
} from '../../bench/evaluate/svg.js';

// A small XML checker: every tag opens and closes in order, attributes are quoted, text holds no raw < or bare &.
function checkWellFormed(xml) {
  const problems = [];
  const stack = [];
  const token = /<(\/?)([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>|([^<]+)|(<)/g;
  let match;
  let end = 0;
  while ((match = token.exec(xml)) !== null) {
    end = token.lastIndex;
    const [, closing, name, , selfClosing, text, stray] = match;
    if (stray) problems.push(`unparsable markup at ${match.index}: ${xml.slice(match.index, match.index + 40)}`);
    else if (text !== undefined) {
      if (/&(?!(amp|lt|gt|quot|apos|#\d+);)/.test(text)) problems.push(`bare & in text: ${text.slice(0, 40)}`);
    } else if (closing) {
      if (stack.pop() !== name) problems.push(`</${name}> closes the wrong element`);
    } else if (!selfClosing) stack.push(name);
  }
  if (end !== xml.length) problems.push('trailing garbage');
  if (stack.length > 0) problems.push(`unclosed: ${stack.join(', ')}`);
  for (const [, value] of xml.matchAll(/="([^"]*)"/g)) {
    if (/&(?!(amp|lt|gt|quot|apos|#\d+);)/.test(value) || value.includes('<')) problems.push(`bad attribute value: ${value}`);
  }
  return problems;
}

const count = (xml, pattern) => (xml.match(pattern) ?? []).length;
const textsOf = (xml) => [...xml.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);
const points = (n, f) => Array.from({ length: n }, (_, t) => ({ t, v: f(t) }));

describe('escapeXml', () => {
  test('when text has markup characters, then each becomes an entity', () => {
    expect(escapeXml('a<b & "c" > \'d\'')).toBe('a&lt;b &amp; &quot;c&quot; &gt; &apos;d&apos;');
  });
});

describe('ticks', () => {
  test.each([
    [0, 2000, 5, [0, 500, 1000, 1500, 2000]],
    [0, 1, 5, [0, 0.2, 0.4, 0.6, 0.8, 1]],
    [0, 59, 8, [0, 10, 20, 30, 40, 50, 60]],
    [-3, 3, 5, [-4, -2, 0, 2, 4]],
    [0, 0, 5, [0, 0.2, 0.4, 0.6, 0.8, 1]],
    [5, 5, 5, [5, 5.1, 5.2, 5.3, 5.4, 5.5]],
  ])('when a linear axis spans %d..%d, then ticks are %j', (min, max, n, ticks) => {
    expect(linearTicks(min, max, n).ticks).toEqual(ticks);
  });

  test('when a log axis spans 0.7..2300, then ticks are the powers of ten around it', () => {
    expect(logTicks(0.7, 2300)).toEqual({ min: 0.1, max: 10000, ticks: [0.1, 1, 10, 100, 1000, 10000] });
  });

  test('when ranges are arbitrary, then linear ticks are few, ascending, and cover the range (up to rounding)', () => {
    fc.assert(fc.property(fc.double({ min: -1e6, max: 1e6, noNaN: true }), fc.double({ min: 0, max: 1e6, noNaN: true }), (lo, span) => {
      const { min, max, ticks } = linearTicks(lo, lo + span, 5);
      const slack = (ticks[1] - ticks[0]) * 1e-6;
      return min <= lo + slack && max >= lo + span - slack && ticks.length >= 2 && ticks.length <= 12
        && ticks.every((t, i) => i === 0 || t > ticks[i - 1]);
    }), { numRuns: 500 });
  });

  test.each([[0, '0'], [2.5, '2.5'], [1500, '1500'], [25000, '25k'], [3e6, '3M'], [0.001, '1e-3']])(
    'when the tick is %d, then it reads %s', (value, text) => { expect(formatTick(value)).toBe(text); },
  );
});

describe('renderTimeSeries', () => {
  const svg = renderTimeSeries({
    title: 'p99 <latency> & "more"',
    xLabel: 'time (s)',
    yLabel: 'ms',
    series: [
      { label: 'reads <R>', points: points(10, (t) => (t === 4 ? null : t + 1)), color: '#123456' },
      { label: 'updates', points: points(10, (t) => 2 * t + 1) },
    ],
    events: [{ t: 3, label: 'kill "rethinkdb_1" & wait' }, { t: 7, label: 'back' }],
    width: 640,
    height: 280,
  });

  test('when rendered, then it is one well-formed svg element of the given size', () => {
    expect(checkWellFormed(svg)).toEqual([]);
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg" width="640" height="280"')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    expect(svg).not.toMatch(/NaN|Infinity|undefined/);
  });

  test('when labels hold markup characters, then they are escaped, never raw', () => {
    expect(textsOf(svg)).toEqual(expect.arrayContaining([
      'p99 &lt;latency&gt; &amp; &quot;more&quot;', 'reads &lt;R&gt;', 'kill &quot;rethinkdb_1&quot; &amp; wait', 'time (s)', 'ms',
    ]));
    expect(svg).not.toContain('<latency>');
  });

  test('when a value is missing, then the line breaks there; each series has its legend entry', () => {
    expect(count(svg, /<polyline /g)).toBe(3); // reads: two runs around the gap, updates: one
    expect(count(svg, /stroke="#123456"/g)).toBe(3); // two runs and the legend swatch
    expect(textsOf(svg)).toEqual(expect.arrayContaining(['reads &lt;R&gt;', 'updates']));
  });

  test('when there are events, then each is a dashed vertical line with its label', () => {
    const dashed = [...svg.matchAll(/<line x1="([\d.]+)" y1="([\d.]+)" x2="([\d.]+)" y2="([\d.]+)"[^>]*stroke-dasharray/g)];
    expect(dashed).toHaveLength(2);
    expect(dashed.every(([, x1, y1, x2, y2]) => x1 === x2 && Number(y2) > Number(y1))).toBe(true);
    expect(textsOf(svg)).toContain('back');
  });

  test('when the axes are drawn, then the y ticks cover the data and x ticks are labelled', () => {
    expect(textsOf(svg)).toEqual(expect.arrayContaining(['0', '5', '10', '15', '20']));
  });

  test('when the y axis is logarithmic, then values at or below zero are left out and ticks are powers of ten', () => {
    const log = renderTimeSeries({ title: 'log', yLog: true, series: [{ label: 'p99', points: [{ t: 0, v: 0 }, { t: 1, v: 3 }, { t: 2, v: 800 }] }] });
    expect(checkWellFormed(log)).toEqual([]);
    expect(textsOf(log)).toEqual(expect.arrayContaining(['1', '10', '100', '1000']));
    expect(count(log, /<polyline /g)).toBe(1);
    expect(log).not.toMatch(/NaN|Infinity/);
  });

  test('when there is nothing to draw, then it still renders an empty, well-formed plot', () => {
    for (const options of [{ series: [] }, { series: [{ label: 'x', points: [] }], yLog: true }, { series: [{ label: 'x', points: [{ t: 1, v: null }] }] }]) {
      const empty = renderTimeSeries({ title: 'empty', ...options });
      expect(checkWellFormed(empty)).toEqual([]);
      expect(empty).not.toMatch(/NaN|Infinity/);
    }
  });

  test('when a lone point sits between gaps, then it is drawn as a dot', () => {
    const lone = renderTimeSeries({ series: [{ label: 'x', points: [{ t: 0, v: null }, { t: 1, v: 5 }, { t: 2, v: null }] }] });
    expect(count(lone, /<circle /g)).toBe(1);
  });
});

describe('renderFigure', () => {
  const events = [{ t: 20, label: 'PRESTOP' }];
  const figure = renderFigure({
    title: 'Drain & recovery',
    xLabel: 'time (s)',
    panels: [
      { title: 'p99 latency', yLabel: 'ms', yLog: true, events, series: [{ label: 'p99', points: points(40, (t) => 5 + t) }] },
      { title: 'throughput', yLabel: 'ops/s', events, series: [{ label: 'ok/s', points: points(60, () => 2000) }] },
    ],
    width: 700,
    panelHeight: 200,
  });

  test('when panels are stacked, then the figure is well-formed, as tall as its panels, with one clip area each', () => {
    expect(checkWellFormed(figure)).toEqual([]);
    expect(figure).toMatch(/^<svg [^>]*width="700" height="430"/);
    expect(count(figure, /<clipPath id="fig-clip-\d"/g)).toBe(2);
    expect(new Set(figure.match(/id="[^"]+"/g)).size).toBe(2);
    expect(textsOf(figure)).toEqual(expect.arrayContaining(['Drain &amp; recovery', 'p99 latency', 'throughput']));
  });

  test('when panels share the time axis, then x tick labels, the x label and event labels appear once', () => {
    expect(textsOf(figure).filter((t) => t === 'time (s)')).toHaveLength(1);
    expect(textsOf(figure).filter((t) => t === 'PRESTOP')).toHaveLength(1);
    expect(textsOf(figure).filter((t) => t === '60')).toHaveLength(1);
    expect(count(figure, /stroke-dasharray/g)).toBe(2);
  });
  test('when the title is longer than the figure is wide, then it is squeezed to the width; a short one is not', () => {
    const long = 'IV-B2 PRESTOP then a silent network loss, the lost server leading the table\'s Raft group (first pair)';
    const squeezed = renderFigure({ title: long, panels: [{ series: [] }], width: 720 });
    expect(squeezed).toMatch(/<text x="360" y="20" text-anchor="middle" textLength="704" lengthAdjust="spacingAndGlyphs"/);
    expect(checkWellFormed(squeezed)).toEqual([]);
    expect(figure).not.toMatch(/textLength/);
  });
});
