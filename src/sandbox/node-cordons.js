// Cordons of the sandbox's nodes (and the lab's, test/lab/lab-kube.js), and the watchers that see them as an
// informer on nodes delivers them (src/kubernetes/kube-adapter.js watchNodes): each watcher gets every node at
// once, then each change. A cordoned node carries the taint Kubernetes adds with spec.unschedulable.

export function createNodeCordons() {
  const cordoned = new Set();
  const watchers = new Set();
  const view = (name) => ({
    name, unschedulable: cordoned.has(name), taints: cordoned.has(name) ? [{ key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' }] : [],
  });
  return {
    // names: the nodes there are now. Returns { stop }.
    watch(watcher, names) {
      watchers.add(watcher);
      for (const name of names) watcher.onNode(view(name));
      return { stop: async () => { watchers.delete(watcher); } };
    },
    set(name, unschedulable) {
      if (unschedulable) cordoned.add(name); else cordoned.delete(name);
      for (const w of watchers) w.onNode(view(name));
    },
  };
}
