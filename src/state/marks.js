// Which servers are draining: no action puts a primary or a new replica on them until they are released.
// In memory; the port lets a persistent implementation replace it without touching the actions.

export function createMemoryMarkStore({ clock }) {
  const draining = new Map();
  return {
    async markDraining(serverId, { reason, serverName }) {
      if (!draining.has(serverId)) draining.set(serverId, { serverId, serverName, reason, since: new Date(clock.now()).toISOString() });
      return draining.get(serverId);
    },
    async release(serverId) {
      return draining.delete(serverId);
    },
    async drainingIds() {
      return [...draining.keys()];
    },
    async list() {
      return [...draining.values()];
    },
  };
}
