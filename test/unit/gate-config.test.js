// The gate's configuration (gate/src/config.js): every problem said at once, one message per wrong key, and a GATE_
// variable that is no key named with the key it most likely meant.

import { loadGateConfig, unknownGateKeys } from '../../gate/src/config.js';

const problemsOf = (env) => {
  try {
    loadGateConfig(env);
    return [];
  } catch (err) {
    return err.problems;
  }
};

describe('the gate configuration', () => {
  test('when GATE_UPSTREAM is given but is not host:port, then that is the one problem said (not also that it is missing)', () => {
    expect(problemsOf({ GATE_UPSTREAM: 'localhost' })).toEqual(['GATE_UPSTREAM="localhost": must be host:port (e.g. rethinkdb-proxy:28015)']);
  });

  test('when GATE_UPSTREAM is not given, then it is said to be required', () => {
    expect(problemsOf({})).toEqual(['GATE_UPSTREAM is required: host:port of a RethinkDB proxy or server (its driver port)']);
  });

  test('when a GATE_ variable is misspelt, then the configuration loads and warns, naming the key it most likely meant', () => {
    const config = loadGateConfig({ GATE_UPSTREAM: 'proxy:28015', GATE_RETRY_BUDGET: '5', GATE_DRAIN_SECOND: '3' });
    expect(config.warnings).toEqual([
      'GATE_DRAIN_SECOND is not a gate configuration key (did you mean GATE_DRAIN_SECONDS?); it is ignored',
      'GATE_RETRY_BUDGET is not a gate configuration key (did you mean GATE_RETRY_BUDGET_MS?); it is ignored',
    ]);
    expect(config.retry.budgetMs).toBe(3000);
  });

  test('when Kubernetes adds service links for a Service named gate-..., then they are not taken for misspellings; a far name has no guess', () => {
    expect(unknownGateKeys({
      GATE_METRICS_SERVICE_HOST: '198.18.0.1', GATE_METRICS_SERVICE_PORT: '9180', GATE_METRICS_PORT_9180_TCP: 'tcp://198.18.0.1:9180',
      GATE_METRICS_PORT_9180_TCP_ADDR: '198.18.0.1', GATE_SOMETHING_ELSE_ENTIRELY: 'x', GATE_PORT: '28017',
    })).toEqual([{ key: 'GATE_SOMETHING_ELSE_ENTIRELY', nearest: null }]);
  });

  test('when the shutdown keys are given, then they are read; out of range is a problem', () => {
    const config = loadGateConfig({ GATE_UPSTREAM: 'proxy:28015', GATE_SHUTDOWN_DELAY_SECONDS: '7', GATE_DRAIN_IDLE_MS: '0' });
    expect([config.shutdownDelaySeconds, config.drainIdleMs, config.drainSeconds]).toEqual([7, 0, 20]);
    expect(problemsOf({ GATE_UPSTREAM: 'proxy:28015', GATE_SHUTDOWN_DELAY_SECONDS: '601' })).toEqual(['GATE_SHUTDOWN_DELAY_SECONDS="601": must be an integer between 0 and 600']);
  });
});
