// `node scripts/config-reference.js [--check]`: writes the configuration reference in docs/configuration.md, between
// its BEGIN and END markers, from the keys the code knows (src/config.js, CONFIG_KEYS: names and defaults) and their
// meanings (docs/configuration.keys.yaml). So the reference cannot drift from the code: a key added to src/config.js
// without a meaning, or a meaning left for a key that is gone, stops it (exit 1).
// --check writes nothing: exit 0 if docs/configuration.md is what it would write, 1 (with what differs) otherwise.

import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parse } from 'yaml';
import { CONFIG_KEYS } from '../src/config.js';

export const REFERENCE_PATH = fileURLToPath(new URL('../docs/configuration.md', import.meta.url));
export const MEANINGS_PATH = fileURLToPath(new URL('../docs/configuration.keys.yaml', import.meta.url));
export const BEGIN = '<!-- BEGIN config-reference: written by `node scripts/config-reference.js` from src/config.js and docs/configuration.keys.yaml; edit those, not this table -->';
export const END = '<!-- END config-reference -->';

// A key's default as the table shows it: the code's value, or for a default computed at start (undefined in
// CONFIG_KEYS) the words of the meanings file's `unset`, else (none).
export function formatDefault(value, { unset, note } = {}) {
  let text;
  if (value === undefined) text = unset ?? '(none)';
  else if (value === '' || (Array.isArray(value) && value.length === 0)
    || (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 0)) text = 'empty';
  else if (Array.isArray(value)) text = `\`${value.join(',')}\``;
  else if (typeof value === 'object') text = `\`${Object.entries(value).map(([k, v]) => `${k}=${v}`).join(',')}\``;
  else text = `\`${String(value)}\``;
  return note ? `${text} ${note}` : text;
}

// A table cell: one line, and a | that would end the cell escaped.
function cell(text) {
  return String(text).replace(/\s*\n\s*/g, ' ').trim().replace(/(?<!\\)\|/g, '\\|');
}

// Pure: the reference (the text between the markers) for these keys and these meanings; throws, naming every key,
// when a key has no meaning, a meaning names no key, or an `unset` is given for a key whose default is in the code.
export function renderReference(keys, meanings) {
  const problems = [];
  const byEnv = new Map(keys.map((k) => [k.env, k]));
  const described = new Set();
  const sections = meanings?.sections;
  if (!Array.isArray(sections)) throw new Error(`${MEANINGS_PATH}: expected a "sections" list`);
  const lines = [];
  for (const section of sections) {
    const entries = Object.entries(section.keys ?? {});
    lines.push(`### ${section.title}`, '', '| variable | default | meaning |', '| --- | --- | --- |');
    for (const [env, entry] of entries) {
      if (described.has(env)) problems.push(`${env} is described twice`);
      described.add(env);
      const key = byEnv.get(env);
      if (!key) { problems.push(`${env} has a meaning but src/config.js has no such key: remove it`); continue; }
      if (!entry?.meaning || !String(entry.meaning).trim()) { problems.push(`${env} has no meaning`); continue; }
      if (entry.unset !== undefined && key.default !== undefined) problems.push(`${env}: "unset" is only for a default computed at start, and this one is ${JSON.stringify(key.default)}`);
      lines.push(`| \`${env}\` | ${cell(formatDefault(key.default, entry))} | ${cell(entry.meaning)} |`);
    }
    lines.push('');
  }
  for (const { env } of keys) {
    if (!described.has(env)) problems.push(`${env} (src/config.js) has no meaning: add it to docs/configuration.keys.yaml`);
  }
  if (problems.length > 0) {
    const err = new Error(`configuration reference:\n  - ${problems.join('\n  - ')}`);
    err.problems = problems;
    throw err;
  }
  return lines.join('\n').trimEnd();
}

// The document with its reference replaced by `reference`.
export function withReference(document, reference) {
  const begin = document.indexOf(BEGIN);
  const end = document.indexOf(END);
  if (begin < 0 || end < begin) throw new Error(`${REFERENCE_PATH}: the markers are missing:\n${BEGIN}\n${END}`);
  return `${document.slice(0, begin + BEGIN.length)}\n${reference}\n${document.slice(end)}`;
}

export function readMeanings(path = MEANINGS_PATH) {
  return parse(readFileSync(path, 'utf8'));
}

// What docs/configuration.md is and what it should be.
export function compare({ keys = CONFIG_KEYS, meanings = readMeanings(), path = REFERENCE_PATH } = {}) {
  const actual = readFileSync(path, 'utf8');
  const expected = withReference(actual, renderReference(keys, meanings));
  return { actual, expected, upToDate: actual === expected };
}

function firstDifference(a, b) {
  const x = a.split('\n');
  const y = b.split('\n');
  for (let i = 0; i < Math.max(x.length, y.length); i += 1) {
    if (x[i] !== y[i]) return `line ${i + 1}:\n  is:        ${x[i] ?? '(nothing)'}\n  should be: ${y[i] ?? '(nothing)'}`;
  }
  return '';
}

function main(args) {
  const check = args.includes('--check');
  const unknown = args.filter((a) => a !== '--check');
  if (unknown.length > 0) {
    process.stderr.write(`config-reference: unknown argument ${unknown[0]}\nusage: node scripts/config-reference.js [--check]\n`);
    return 2;
  }
  let result;
  try {
    result = compare();
  } catch (err) {
    process.stderr.write(`${err.message}\n`);
    return 1;
  }
  if (check) {
    if (result.upToDate) return 0;
    process.stderr.write(`docs/configuration.md is not up to date; run: node scripts/config-reference.js\n${firstDifference(result.actual, result.expected)}\n`);
    return 1;
  }
  if (!result.upToDate) writeFileSync(REFERENCE_PATH, result.expected);
  process.stdout.write(`docs/configuration.md ${result.upToDate ? 'was up to date' : 'written'} (${CONFIG_KEYS.length} keys)\n`);
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) process.exitCode = main(process.argv.slice(2));
