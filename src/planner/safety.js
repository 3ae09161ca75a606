// Pure: the last check before any table_config write. A transition that breaks an invariant is never written.

import {
  createView, hasLiveMajority, primaryIneligibility, votingReplicas,
} from './eligibility.js';

// Returns a list of violations (empty when the new shards are safe to write).
// mayLowerVoters: the change means to take a vote away (a Raft leadership move makes a server nonvoting for a moment);
// any other change that leaves a shard fewer voting replicas than it has is refused, whatever planned it (two data
// moves planned on one another's half-done config once wrote a shard down from 3 replicas to 2).
// owedVoters(index): the servers a Raft leadership move made nonvoting in that shard and owes the vote back (the
// journal): they count as voters, so that no move takes one for a staged replica, or its shard below its count.
export function checkTransition(cluster, table, newShards, { draining = [], mayLowerVoters = false, owedVoters = () => [] } = {}) {
  const view = createView(cluster, { draining });
  const violations = [];
  if (newShards.length !== table.shards.length) {
    violations.push(`shard count changed from ${table.shards.length} to ${newShards.length}`);
    return violations;
  }
  newShards.forEach((next, index) => {
    const before = table.shards[index];
    const where = `${table.db}.${table.name} shard ${index}`;
    violations.push(...checkShape(next, where));
    // The new config judged against the states observed now: only replicas, nonvoting and states are read.
    const after = { replicas: next.replicas, nonvoting: next.nonvoting, states: before.states };
    if (next.primary !== before.primary) {
      const why = primaryIneligibility(view, after, next.primary);
      if (why) violations.push(`${where}: ${view.nameOf(next.primary)} cannot become primary (${why})`);
    }
    if (hasLiveMajority(view, before) && !hasLiveMajority(view, after)) {
      violations.push(`${where}: change would leave the shard without a live voting majority`);
    }
    const owed = owedVoters(index);
    const voters = (shard) => votingReplicas(shard).length + shard.nonvoting.filter((id) => owed.includes(id) && shard.replicas.includes(id)).length;
    const votersBefore = voters(before);
    const votersAfter = voters(next);
    if (votersAfter < votersBefore && !mayLowerVoters) {
      violations.push(`${where}: change would lower the shard's voting replicas from ${votersBefore} to ${votersAfter}`);
    }
  });
  return violations;
}

function checkShape(shard, where) {
  const problems = [];
  if (shard.replicas.length === 0) problems.push(`${where}: no replicas`);
  if (new Set(shard.replicas).size !== shard.replicas.length) problems.push(`${where}: a server is listed twice`);
  if (!shard.replicas.includes(shard.primary)) problems.push(`${where}: primary is not a replica`);
  if (shard.nonvoting.includes(shard.primary)) problems.push(`${where}: primary is nonvoting`);
  if (shard.nonvoting.some((id) => !shard.replicas.includes(id))) problems.push(`${where}: nonvoting server not in replicas`);
  if (!shard.replicas.some((id) => !shard.nonvoting.includes(id))) problems.push(`${where}: no voting replicas`);
  return problems;
}
