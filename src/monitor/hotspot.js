// Pure: how resource-limited each RethinkDB pod is, and whether that is a skewed hot-spot (paper III:
// U(Pi) >= 80% and U(Pi) >= 130% of the average) or uniform overload. U is computed two ways:
//   own:          the pod's CPU usage against its CPU limit (falling back to its request);
//   interference: its node's CPU usage against the node's allocatable CPU, because a co-located process
//                 that drains the node starves the pod, which then shows *less* CPU use, not more.

import { pct } from '../policy/monitor.js';

export function utilizationSamples({ pods, podMetrics, nodes, nodeMetrics }) {
  const podUsage = new Map(podMetrics.map((m) => [m.name, m.cpuCores]));
  const nodeUsage = new Map(nodeMetrics.map((m) => [m.name, m.cpuCores]));
  const allocatable = new Map(nodes.map((n) => [n.name, n.allocatableCpuCores]));
  return pods.map((pod) => {
    const capacity = pod.cpuLimitCores ?? pod.cpuRequestCores;
    const usage = podUsage.get(pod.name);
    const nodeCapacity = allocatable.get(pod.nodeName);
    const nodeCores = nodeUsage.get(pod.nodeName);
    return {
      pod: pod.name,
      node: pod.nodeName,
      own: usage !== undefined && capacity ? ratio(usage, capacity) : null,
      ownBasis: pod.cpuLimitCores ? 'limit' : pod.cpuRequestCores ? 'request' : null,
      interference: nodeCores !== undefined && nodeCapacity ? ratio(nodeCores, nodeCapacity) : null,
    };
  });
}

const SIGNALS = ['own', 'interference'];

export function evaluateHotspots(samples, { hotUtilization, hotSkew }) {
  const averages = Object.fromEntries(SIGNALS.map((signal) => [signal, average(samples.map((s) => s[signal]))]));
  const uniform = averages.own !== null && averages.own >= hotUtilization;
  const hot = [];
  for (const sample of samples) {
    // Every signal on which the pod is hot ({ own, interference }: its U, or absent); the first names the hot-spot.
    const hotOn = {};
    for (const signal of SIGNALS) {
      const u = sample[signal];
      const avg = averages[signal];
      if (u === null || avg === null || uniform) continue;
      if (u >= hotUtilization && u >= hotSkew * avg) hotOn[signal] = u;
    }
    const [signal] = SIGNALS.filter((x) => x in hotOn);
    if (!signal) continue;
    const u = hotOn[signal];
    const avg = averages[signal];
    const what = signal === 'own' ? `its own CPU use is ${pct(u)} of its ${sample.ownBasis}` : `node ${sample.node} is ${pct(u)} busy (interference from its neighbours)`;
    hot.push({ pod: sample.pod, signal, utilization: u, average: avg, hotOn, reason: `${sample.pod}: ${what}; average ${pct(avg)}, thresholds ${pct(hotUtilization)} and ${hotSkew}x the average` });
  }
  return { samples, averages, uniform, hot };
}

function average(values) {
  const known = values.filter((v) => v !== null && v !== undefined);
  return known.length === 0 ? null : ratio(known.reduce((a, b) => a + b, 0), known.length);
}

// Utilizations to 4 decimals (0.01%): metrics-server's figures are not finer, and a quotient such as
// 0.19999999999999996 neither reads well in /v1/monitor and /metrics nor compares as meant with a threshold of 0.2.
const UTILIZATION_DECIMALS = 1e4;
function ratio(part, whole) {
  return Math.round((part / whole) * UTILIZATION_DECIMALS) / UTILIZATION_DECIMALS;
}
