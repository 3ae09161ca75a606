// A watched node's named states (src/policy/node-watch.js): when its drain signal is acted on, when a round looks at
// it again, and what GET /v1/maintenance shows; and the eviction review's states (src/policy/maintenance.js).

import {
  UNHANDLED, handledNode, nodeForRound, nodeNeedsHandling, nodeRoundDue, signalledNodes,
} from '../../src/policy/node-watch.js';
import { evictionAfterDeadline, evictionReviewMayAct } from '../../src/policy/maintenance.js';

const cordon = { kind: 'cordon', text: 'node n1 is cordoned' };
const taint = { kind: 'taint', key: 'node.kubernetes.io/unschedulable', text: 'node n1 is tainted' };

describe('a watched node', () => {
  test.each([
    ['unhandled, no signal', UNHANDLED, null, true],
    ['unhandled, cordoned', UNHANDLED, cordon, true],
    ['handled without a signal, still none', handledNode(null, 0), null, false],
    ['handled without a signal, now cordoned', handledNode(null, 0), cordon, true],
    ['handled cordoned, still cordoned', handledNode(cordon, 0), { ...cordon }, false],
    ['handled cordoned, now tainted instead', handledNode(cordon, 0), taint, true],
    ['handled cordoned, now uncordoned', handledNode(cordon, 0), null, true],
  ])('when it is %s, then it needs handling: %s', (_, state, signal, needs) => {
    expect(nodeNeedsHandling(state, signal)).toBe(needs);
  });

  test.each([
    ['a failure on record, its backoff not passed', UNHANDLED, { failing: true, backoffPassed: false, now: 10 }, null],
    ['a failure on record, its backoff passed', UNHANDLED, { failing: true, backoffPassed: true, now: 10 }, 'retry'],
    ['handled with a signal, for less than the recheck period', handledNode(cordon, 0), { now: 29999 }, null],
    ['handled with a signal, for the recheck period', handledNode(cordon, 0), { now: 30000 }, 'recheck'],
    ['handled without a signal, long ago', handledNode(null, 0), { now: 1e9 }, null],
    ['unhandled with no failure (a handling running)', UNHANDLED, { now: 1e9 }, null],
  ])('when it has %s, then the round does %s', (_, state, at, due) => {
    expect(nodeRoundDue(state, { failing: false, backoffPassed: true, recheckMs: 30000, ...at })).toBe(due);
  });

  test('when a round rechecks a node, then it is handled again whatever its signal; a retry keeps its state', () => {
    const state = handledNode(cordon, 0);
    expect(nodeNeedsHandling(nodeForRound(state, 'recheck'), cordon)).toBe(true);
    expect(nodeForRound(UNHANDLED, 'retry')).toBe(UNHANDLED);
  });

  test('when nodes are listed, then only those handled with a signal are shown, with it', () => {
    expect(signalledNodes([
      { name: 'n1', state: handledNode(cordon, 5) }, { name: 'n2', state: handledNode(null, 5) }, { name: 'n3', state: UNHANDLED },
    ])).toEqual([{ node: 'n1', signal: cordon }]);
  });
});

describe('an eviction review', () => {
  test.each([
    ['deciding', 'allow-unchecked', true],
    ['demoting', 'refuse', true],
    ['answered', 'allow-unchecked', false],
  ])('when its deadline passes while %s, then the webhook answers %s; it may still act: %s', (phase, answer, mayAct) => {
    expect(evictionAfterDeadline(phase)).toBe(answer);
    expect(evictionReviewMayAct(phase)).toBe(mayAct);
  });
});
