// docs/configuration.md is generated from the code (scripts/config-reference.js): it must be up to date, list every
// key of src/config.js with its default, and the generator must refuse a key without a meaning.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CONFIG_KEYS } from '../../src/config.js';
import {
  BEGIN, END, REFERENCE_PATH, compare, formatDefault, readMeanings, renderReference, withReference,
} from '../../scripts/config-reference.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const reference = readFileSync(REFERENCE_PATH, 'utf8');
const rowOf = (env) => reference.split('\n').find((line) => line.startsWith(`| \`${env}\` |`));

describe('docs/configuration.md', () => {
  test('when the reference is generated again from src/config.js and the meanings, then the file is unchanged (run node scripts/config-reference.js)', () => {
    const { actual, expected } = compare();
    expect(actual).toBe(expected);
  });

  test('when `node scripts/config-reference.js --check` runs, then it exits 0', () => {
    const run = spawnSync(process.execPath, ['scripts/config-reference.js', '--check'], { cwd: repoRoot, encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  });

  test.each(CONFIG_KEYS.map((k) => [k.env, k.default]))('when %s is looked up, then its row shows its default', (env, def) => {
    const row = rowOf(env);
    expect(row).toBeDefined();
    const [, , defaultCell] = row.split(/(?<!\\)\|/).map((c) => c.trim());
    expect(defaultCell).toBe(formatDefault(def, readMeanings().sections.map((s) => s.keys?.[env]).find(Boolean)));
    if (typeof def === 'number' || typeof def === 'boolean' || (typeof def === 'string' && def !== '')) expect(defaultCell).toContain(`\`${def}\``);
    if (Array.isArray(def) && def.length > 0) expect(defaultCell).toContain(`\`${def.join(',')}\``);
    if (def === '' || (Array.isArray(def) && def.length === 0)) expect(defaultCell).toMatch(/^empty/);
  });

  test('when every row is counted, then there is one per key, each with a meaning', () => {
    const rows = reference.slice(reference.indexOf(BEGIN), reference.indexOf(END)).split('\n').filter((l) => l.startsWith('| `'));
    expect(rows).toHaveLength(CONFIG_KEYS.length);
    for (const row of rows) expect(row.split(/(?<!\\)\|/)[3].trim()).not.toBe('');
  });
});

describe('scripts/config-reference.js', () => {
  const meanings = { sections: [{ title: 'A', keys: { A_KEY: { meaning: 'what A does' }, B_KEY: { meaning: 'what B does', unset: '`x` if y' } } }] };

  test('when a key of src/config.js has no meaning, then rendering fails and names it', () => {
    expect(() => renderReference([...CONFIG_KEYS, { env: 'NEW_KEY_WITHOUT_ROW', default: 1 }], readMeanings())).toThrow(/NEW_KEY_WITHOUT_ROW \(src\/config\.js\) has no meaning/);
  });

  test('when a meaning names a key the code does not have, then rendering fails and names it', () => {
    expect(() => renderReference([{ env: 'A_KEY', default: 1 }, { env: 'B_KEY', default: undefined }], {
      sections: [{ title: 'A', keys: { ...meanings.sections[0].keys, GONE_KEY: { meaning: 'gone' } } }],
    })).toThrow(/GONE_KEY has a meaning but src\/config\.js has no such key/);
  });

  test('when "unset" is given for a default the code has, then rendering fails', () => {
    expect(() => renderReference([{ env: 'A_KEY', default: 1 }, { env: 'B_KEY', default: 2 }], meanings)).toThrow(/B_KEY: "unset" is only for a default computed at start/);
  });

  test('when keys and meanings agree, then each section is a table with the defaults from the code', () => {
    expect(renderReference([{ env: 'A_KEY', default: 5 }, { env: 'B_KEY', default: undefined }], meanings)).toBe([
      '### A', '', '| variable | default | meaning |', '| --- | --- | --- |',
      '| `A_KEY` | `5` | what A does |', '| `B_KEY` | `x` if y | what B does |',
    ].join('\n'));
  });

  test.each([
    [undefined, {}, '(none)'], ['', {}, 'empty'], [[], { note: '(all user tables)' }, 'empty (all user tables)'], [{}, {}, 'empty'],
    [['a', 'b'], {}, '`a,b`'], [false, {}, '`false`'], [0.8, {}, '`0.8`'], ['info', {}, '`info`'],
  ])('when the default is %j (with %j), then it shows as %s', (value, entry, shown) => {
    expect(formatDefault(value, entry)).toBe(shown);
  });

  test('when a meaning holds a |, then the cell escapes it', () => {
    expect(renderReference([{ env: 'A_KEY', default: 1 }], { sections: [{ title: 'A', keys: { A_KEY: { meaning: 'a | b' } } }] })).toContain('| a \\| b |');
  });

  test('when the markers are missing, then the document is refused', () => {
    expect(() => withReference('# no markers', 'x')).toThrow(/markers are missing/);
    expect(withReference(`a\n${BEGIN}\nold\n${END}\nb`, 'new')).toBe(`a\n${BEGIN}\nnew\n${END}\nb`);
  });
});
