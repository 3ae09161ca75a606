// The lab's CPU nodes: which CPUs an isolated node and the rest get (pure; the cgroups themselves are exercised by
// the real-cluster tests and the evaluation).

import { parseCpuList, planCpuIsolation } from '../lab/cpu-nodes.js';

describe('parseCpuList', () => {
  test.each([
    ['0-1', [0, 1]],
    ['0', [0]],
    ['0-2,5,7-8\n', [0, 1, 2, 5, 7, 8]],
  ])('when the cpuset list is %p, then the CPUs are %p', (text, cpus) => {
    expect(parseCpuList(text)).toEqual(cpus);
  });
});

describe('planCpuIsolation', () => {
  test('when one node of a 2-CPU machine is isolated, then it gets the last CPU and everything else the first', () => {
    expect(planCpuIsolation([0, 1], [1])).toEqual({ shared: [0], nodes: new Map([[1, [1]]]) });
  });

  test('when two nodes of a 4-CPU machine are isolated, then each gets one of the last CPUs', () => {
    expect(planCpuIsolation([0, 1, 2, 3], [3, 1])).toEqual({ shared: [0, 1], nodes: new Map([[3, [2]], [1, [3]]]) });
  });

  test.each([
    ['nothing is isolated', [0, 1], []],
    ['no CPU would be left to share', [0, 1], [0, 1]],
    ['the machine has one CPU', [0], [1]],
  ])('when %s, then there is no isolation plan', (_, cpus, isolate) => {
    expect(planCpuIsolation(cpus, isolate)).toBeNull();
  });
});
