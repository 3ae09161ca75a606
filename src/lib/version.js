// The manager's version: package.json's, read once. /livez, the build_info metric and the image's label report it.

import { readFileSync } from 'node:fs';

export const VERSION = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version;
