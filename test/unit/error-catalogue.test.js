// The error catalogue (src/errors.js): every message the manager composes has a name, a code and a template there,
// and no source file composes one beside a throw.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  AppError, ERROR_CATALOGUE, ERROR_CODES, appError,
} from '../../src/errors.js';

// Every .js file under src/.
function sourceFiles(dir = 'src') {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.js') ? [path] : [];
  });
}

describe('the error catalogue', () => {
  test('when an entry is made, then it has a known code and the status of that code', () => {
    for (const [name, entry] of Object.entries(ERROR_CATALOGUE)) {
      expect(ERROR_CODES[entry.code]).toBeDefined();
      const err = appError(name, new Proxy({}, { get: () => ['x'] }));
      expect(err).toBeInstanceOf(AppError);
      expect(err.statusCode).toBe(ERROR_CODES[entry.code].statusCode);
    }
  });

  test('when an entry takes facts, then its message says them, and the cause and details are kept', () => {
    const cause = new Error('ECONNRESET');
    const err = appError('storeUnavailable', { what: 'read', message: 'ECONNRESET' }, { cause, details: { tableId: 't' } });
    expect(err).toMatchObject({ code: 'DATA_STORE_UNAVAILABLE', statusCode: 503, message: 'RethinkDB unavailable during "read": ECONNRESET', details: { tableId: 't' } });
    expect(err.cause).toBe(cause);
    expect(appError('shardNotFound', { table: 'app.users', last: 3, shard: 7 }).message).toBe('table app.users has shards 0 to 3, not 7');
    expect(appError('notConnected', { lastError: null }).message).toBe('not connected to RethinkDB yet');
  });

  test('when a name is not in the catalogue, then making it throws', () => {
    expect(() => appError('noSuchError')).toThrow('no error noSuchError in the catalogue');
  });

  test('when a source file throws an AppError, then its message is not composed there (it comes from the catalogue, or whole from elsewhere)', () => {
    const composed = [];
    for (const file of sourceFiles()) {
      if (file.endsWith('errors.js')) continue;
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/new AppError\(\s*'[A-Z_]+',\s*['`"]/g)) {
        composed.push(`${file}:${text.slice(0, m.index).split('\n').length}`);
      }
    }
    expect(composed).toEqual([]);
  });
});
