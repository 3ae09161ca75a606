// Every relative link in README.md and docs/ points to a file that exists and, for a markdown file, to a heading it
// has (GitHub's anchors); and every page of docs/ can be reached from the README or the docs index.

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const pages = [
  'README.md',
  ...readdirSync(join(repoRoot, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`),
  'docs/evaluation/README.md',
];

// The text outside fenced code blocks, with inline code spans blanked (a link's text may be code: kept as a link).
function prose(markdown) {
  const lines = [];
  let fence = null;
  for (const line of markdown.split('\n')) {
    const opener = line.match(/^\s*(```+|~~~+)/);
    if (fence) { if (opener && opener[1][0] === fence[0] && opener[1].length >= fence.length) fence = null; lines.push(''); continue; }
    if (opener) { fence = opener[1]; lines.push(''); continue; }
    lines.push(line);
  }
  return lines.join('\n').replace(/`[^`]*`/g, (span) => span.replace(/[^\n]/g, 'x'));
}

// GitHub's anchor for a heading: lower case, inline markup and punctuation dropped, spaces to hyphens; repeats get -1, -2...
function anchorsOf(markdown) {
  const seen = new Map();
  const anchors = new Set();
  let fence = null;
  for (const line of markdown.split('\n')) {
    const opener = line.match(/^\s*(```+|~~~+)/);
    if (fence) { if (opener && opener[1][0] === fence[0] && opener[1].length >= fence.length) fence = null; continue; }
    if (opener) { fence = opener[1]; continue; }
    const heading = line.match(/^#{1,6}\s+(.*?)\s*#*\s*$/);
    if (!heading) continue;
    const text = heading[1].replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/<[^>]+>/g, '');
    const base = text.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

function linksOf(page) {
  const text = prose(readFileSync(join(repoRoot, page), 'utf8'));
  return [...text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1])
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

const links = pages.flatMap((page) => linksOf(page).map((target) => [page, target]));

describe('links in README.md and docs/', () => {
  test('when the pages are read, then they have relative links to check', () => {
    expect(links.length).toBeGreaterThan(100);
  });

  test.each(links)('when %s links to %s, then the target exists', (page, target) => {
    const [path, anchor] = target.split('#');
    const file = path === '' ? join(repoRoot, page) : join(repoRoot, dirname(page), decodeURIComponent(path));
    expect(relative(repoRoot, file).startsWith('..')).toBe(false);
    expect(existsSync(file)).toBe(true);
    if (anchor !== undefined && file.endsWith('.md') && statSync(file).isFile()) {
      expect([...anchorsOf(readFileSync(file, 'utf8'))]).toContain(decodeURIComponent(anchor));
    }
  });

  test.each(pages.filter((p) => p !== 'README.md' && p !== 'docs/README.md'))('when a reader starts at the README, then %s is linked from it or from docs/README.md', (page) => {
    const linked = ['README.md', 'docs/README.md'].flatMap((from) => linksOf(from).map((t) => join(dirname(from), t.split('#')[0])));
    expect(linked).toContain(page);
  });
});

describe('anchorsOf', () => {
  test('when headings carry code, links, punctuation and repeats, then the anchors are GitHub\'s', () => {
    expect([...anchorsOf([
      '# Install, upgrade and uninstall', '### 4. The webhook certificate', '## Actions that move primaries (answer `200` when done)',
      "## What a proxy's extra hop costs", '## Pod → server', '## Runbooks', '## Runbooks', '```sh', '# not a heading', '```',
    ].join('\n'))]).toEqual([
      'install-upgrade-and-uninstall', '4-the-webhook-certificate', 'actions-that-move-primaries-answer-200-when-done',
      'what-a-proxys-extra-hop-costs', 'pod--server', 'runbooks', 'runbooks-1',
    ]);
  });
});
