// The node informer (NODE_WATCH_ENABLED): each node as listed and each change goes to the maintenance use-case
// (src/events/maintenance.js). It runs only while this replica leads (the runner's 'leading' group).

// start() returns { stop }, or null without a Kubernetes API or with the watch off.
export function createNodeWatch({ kube, maintenance, work, config, logger }) {
  const log = logger.child({ module: 'node-watch' });
  function start() {
    if (!kube?.watchNodes || !config.maintenance.watchNodes) return null;
    return kube.watchNodes({
      retry: config.retry,
      onNode: (node) => {
        work.track(() => maintenance.observeNode(node)).catch((err) => log.warn({ node: node.name, err: err.message }, 'node change not handled'));
      },
      onDelete: (name) => maintenance.forgetNode(name),
      onError: (err, { failures, retryInMs }) => log.warn({ err: err.message, failures, retryInMs }, 'node watch failed; restarting it'),
      onConnect: () => log.debug('node watch (re)connected'),
    });
  }
  return { start };
}
