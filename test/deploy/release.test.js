// Release hygiene: one version (package.json's) everywhere it is written down, the Apache-2.0 licence text, and a
// changelog entry for the version.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  finalStagePairs, findResource, readYamlFile, renderKustomization, repoRoot,
} from '../helpers/deploy-files.js';

const read = (file) => readFileSync(join(repoRoot, file), 'utf8');
const pkg = JSON.parse(read('package.json'));

// The labels a Dockerfile's final stage sets, from every LABEL instruction.
const imageLabels = (dockerfile) => finalStagePairs(dockerfile, 'LABEL');

const tagOf = (image) => image.slice(image.lastIndexOf(':') + 1);

describe('one version', () => {
  test('when package.json and its lockfile are read, then they have the same semantic version', () => {
    expect(pkg.version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(JSON.parse(read('package-lock.json')).version).toBe(pkg.version);
  });

  test('when the Dockerfile is read, then its final stage labels the image with package.json\'s version and licence (OCI labels)', () => {
    expect(imageLabels(read('Dockerfile'))).toMatchObject({
      'org.opencontainers.image.version': pkg.version,
      'org.opencontainers.image.licenses': pkg.license,
    });
  });

  test('when a label parser is given a Dockerfile with a different version, then it reads that version (the check above can fail)', () => {
    const other = 'FROM a AS b\nLABEL org.opencontainers.image.version="9.9.9"\nFROM c\nLABEL x=1 \\\n  org.opencontainers.image.version=0.0.1\n';
    expect(imageLabels(other)).toEqual({ x: '1', 'org.opencontainers.image.version': '0.0.1' });
  });

  test('when the image is built, pushed and run as the README, deploy/k8s and the Compose file say, then its tag is package.json\'s version', () => {
    const readmeTags = [...read('README.md').matchAll(/docker (?:build -t|push) \S*\/rethinkdb-k8s-manager:(\S+)/g)].map((m) => m[1]);
    expect(readmeTags.length).toBeGreaterThanOrEqual(2);
    expect(new Set(readmeTags)).toEqual(new Set([pkg.version]));
    const { resources } = renderKustomization();
    const manager = findResource(resources, 'Deployment', 'rethinkdb-manager').spec.template.spec.containers.find((c) => c.name === 'manager') ?? null;
    expect(tagOf(manager.image)).toBe(pkg.version);
    const [compose] = readYamlFile(join(repoRoot, 'docker/compose.yaml'));
    const images = Object.values(compose.services).map((s) => s.image).filter((image) => image?.startsWith('rethinkdb-k8s-manager:'));
    expect(images.map(tagOf)).toEqual([pkg.version]);
  });
});

describe('LICENSE and CHANGELOG', () => {
  test('when LICENSE is read, then it is the full Apache License 2.0 text that package.json names', () => {
    expect(pkg.license).toBe('Apache-2.0');
    const text = read('LICENSE');
    expect(text).toMatch(/Apache License\s+Version 2\.0, January 2004\s+http:\/\/www\.apache\.org\/licenses\//);
    const sections = [...text.matchAll(/^\s+(\d)\. ([A-Z][^.]+)\./gm)].map((m) => `${m[1]}. ${m[2]}`);
    expect(sections).toEqual([
      '1. Definitions', '2. Grant of Copyright License', '3. Grant of Patent License', '4. Redistribution',
      '5. Submission of Contributions', '6. Trademarks', '7. Disclaimer of Warranty', '8. Limitation of Liability',
      '9. Accepting Warranty or Additional Liability',
    ]);
    expect(text).toContain('END OF TERMS AND CONDITIONS');
    expect(text).toContain('APPENDIX: How to apply the Apache License to your work.');
  });

  test('when CHANGELOG.md is read, then it keeps an Unreleased section first and has a dated entry for package.json\'s version', () => {
    const headings = [...read('CHANGELOG.md').matchAll(/^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$/gm)].map((m) => ({ version: m[1], date: m[2] ?? null }));
    expect(headings[0]).toEqual({ version: 'Unreleased', date: null });
    expect(headings.find((h) => h.version === pkg.version)).toEqual({ version: pkg.version, date: expect.stringMatching(/^\d{4}-\d{2}-\d{2}$/) });
  });
});
