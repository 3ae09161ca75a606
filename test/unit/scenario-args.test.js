// `npm run scenarios`' arguments (parseScenarioArgs): help, ids in any case, and errors that name what is known,
// instead of a stack trace (issue 31).
import { SCENARIOS, parseScenarioArgs } from '../../src/sandbox/scenarios.js';

describe('npm run scenarios: its arguments', () => {
  test('when no argument is given, then every scenario runs, in order', () => {
    expect(parseScenarioArgs([])).toEqual({ ids: SCENARIOS.map((s) => s.id) });
  });

  test.each([['--help'], ['-h'], ['IV-B2', '--help']])('when %p is given, then the usage is asked for', (...args) => {
    expect(parseScenarioArgs(args)).toEqual({ help: true });
  });

  test('when ids are given in any case, then they are the known ids, in the order given', () => {
    expect(parseScenarioArgs(['iv-b3', 'IV-B1'])).toEqual({ ids: ['IV-B3', 'IV-B1'] });
  });

  test('when an id is unknown, then the error names it and lists the known ones', () => {
    expect(parseScenarioArgs(['IV-B2', 'IV-B9'])).toEqual({ error: `unknown scenario IV-B9 (known: ${SCENARIOS.map((s) => s.id).join(', ')})` });
  });

  test('when an option is unknown, then the error names it', () => {
    expect(parseScenarioArgs(['--fast'])).toEqual({ error: 'unknown option --fast (the only option is --help)' });
  });
});
