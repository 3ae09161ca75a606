// Reads the Prometheus text exposition format into series, so that tests can assert exact values.

import request from 'supertest';

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function seriesKey(name, labels = {}) {
  return `${name}${JSON.stringify(Object.fromEntries(Object.entries(labels).sort(([a], [b]) => a.localeCompare(b))))}`;
}

// Every sample line as { name, labels, value }; # HELP and # TYPE lines give the types by metric name.
export function parseExposition(text) {
  const samples = [];
  const types = {};
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('# TYPE ')) {
      const [, , name, type] = line.split(' ');
      types[name] = type;
      continue;
    }
    if (line.startsWith('#')) continue;
    const m = line.match(LINE);
    if (!m) throw new Error(`not an exposition line: ${line}`);
    const labels = Object.fromEntries([...(m[2] ?? '').matchAll(LABEL)].map(([, k, v]) => [k, v]));
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  const byKey = new Map(samples.map((s) => [seriesKey(s.name, s.labels), s.value]));
  return {
    samples,
    types,
    // The value of one series, or undefined when the scrape does not have it.
    value: (name, labels = {}) => byKey.get(seriesKey(name, labels)),
    // Every series of one metric name, as { labels, value }.
    series: (name) => samples.filter((s) => s.name === name).map(({ labels, value }) => ({ labels, value })),
  };
}

export async function scrape(app) {
  const res = await request(app).get('/metrics').timeout(10000);
  const parsed = parseExposition(res.status === 200 ? res.text : '');
  return { status: res.status, contentType: res.headers['content-type'], text: res.text, ...parsed };
}
