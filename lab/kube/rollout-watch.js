// Watches a table and the RethinkDB pods while Kubernetes restarts them (the lab's rollout test, and the evaluation's
// rolling-restart scenario on the lab): table_status every 250 ms through the official driver, and the pods through
// kubectl. What it reports is what clients and operators would see:
// - handovers per shard: how often the acting primary changed hands (a shard without one and back to the same
//   server is no handover);
// - the seconds any shard had fewer than two up-to-date replicas, and the seconds any shard had no up-to-date voting
//   majority. Up to date: connected and not backfilling. A handover makes every replica `waiting_for_primary` or
//   `transitioning` for a moment; they still hold the data, so that counts as up to date (handovers are counted above).
//   The seconds without a majority are also split by cause: with a replica of that shard `disconnected` (a server away:
//   what the readiness gate and PRESTOP's waits are there to prevent), or with every replica connected (what a primary
//   handover does by itself on 2.4.4: the new primary starts a branch and every other replica backfills from it before
//   it counts again, writes refused meanwhile; see docs/rolling-restarts.md);
// - each pod's stop (its deletion) and Ready times, and whether a pod turned Ready while its server still had a
//   replica backfilling or not connected (what the readiness gate is there to prevent).
// The summary is pure (summarizeRolloutSamples), so that its arithmetic is tested without a cluster.

const SAMPLE_MS = 250;
// The replica states of table_status that do not hold the shard's data up to date.
const NOT_UP_TO_DATE = new Set(['backfilling', 'disconnected']);
const upToDate = (state) => !NOT_UP_TO_DATE.has(state);
// A shard one of whose replicas is disconnected: a server away.
const away = (shard) => Object.values(shard.states).includes('disconnected');

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

// connect(): a driver connection to a RethinkDB server (reopened after an error); listPods(): the RethinkDB pods as
// kubectl gives them. r: the driver module.
export function watchRollout({ r, connect, listPods, db, table }) {
  const samples = [];
  const podEvents = [];
  const seen = new Map();
  let running = true;
  let conn = null;

  async function tableSample() {
    try {
      if (!conn?.open) {
        conn = await connect();
        // A server that stops under the connection makes the driver emit 'error' (EPIPE); unheard, it ends the process.
        conn.on('error', () => { conn = null; });
      }
      const status = await r.db(db).table(table).status().run(conn, { timeout: 2 });
      return {
        at: Date.now(),
        shards: status.shards.map((s) => ({
          acting: s.primary_replicas[0] ?? null,
          states: Object.fromEntries(s.replicas.map((x) => [x.server, x.state])),
        })),
      };
    } catch (err) {
      conn = null;
      return { at: Date.now(), error: String(err.msg ?? err.message) };
    }
  }

  // A pod made after the first sample and seen Ready at once (between two samples) turned Ready then too.
  let first = true;
  async function podSample() {
    const pods = await listPods().catch(() => null);
    if (!pods) return;
    const at = Date.now();
    for (const pod of pods) {
      const key = pod.metadata.uid;
      const ready = (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
      const before = seen.get(key) ?? { ready: first ? null : false, deleting: false };
      if (pod.metadata.deletionTimestamp && !before.deleting) podEvents.push({ at, pod: pod.metadata.name, event: 'stopping' });
      if (ready && before.ready === false) podEvents.push({ at, pod: pod.metadata.name, event: 'ready' });
      seen.set(key, { ready, deleting: Boolean(pod.metadata.deletionTimestamp) });
    }
    first = false;
  }

  const loop = (async () => {
    while (running) {
      const [sample] = await Promise.all([tableSample(), podSample()]);
      samples.push(sample);
      await sleep(SAMPLE_MS);
    }
  })();

  return {
    async stop() {
      running = false;
      await loop;
      await conn?.close().catch(() => {});
      return { samples, podEvents, ...summarizeRolloutSamples(samples, podEvents) };
    },
  };
}

// Pure: the figures above from the samples ({ at, shards: [{ acting, states: { server: state } }] } or { at, error })
// and the pod events ({ at, pod, event: 'stopping' | 'ready' }). A pod's server is named after it (rethinkdb-1 runs
// rethinkdb_1). Unreadable samples count towards nothing.
export function summarizeRolloutSamples(samples, podEvents = []) {
  const good = samples.filter((s) => s.shards);
  const shardCount = Math.max(0, ...good.map((s) => s.shards.length));
  const handovers = Array.from({ length: shardCount }, () => 0);
  const lastActing = Array.from({ length: shardCount }, () => null);
  let belowTwoMs = 0;
  let noMajorityMs = 0;
  const noMajorityBy = { serverAway: 0, allConnected: 0 };
  // Where those seconds were: each stretch of consecutive samples with a shard below two up to date, with the shards
  // and their replicas' states at its first sample (to tell a handover's resynchronisation from a server away), and
  // `serverAway` when any of its samples had a short shard with a replica `disconnected`.
  const belowTwo = [];
  let open = null;
  // Both per sample: from it to the next one.
  good.forEach((s, k) => {
    const next = good[k + 1];
    const span = next ? next.at - s.at : 0;
    s.shards.forEach((shard, i) => {
      if (shard.acting && lastActing[i] && shard.acting !== lastActing[i]) handovers[i] += 1;
      if (shard.acting) lastActing[i] = shard.acting;
    });
    const current = s.shards.map((shard) => Object.values(shard.states).filter(upToDate).length);
    if (current.some((n) => n < 2)) {
      belowTwoMs += span;
      const serverAway = s.shards.some((shard, i) => current[i] < 2 && away(shard));
      if (!open) {
        open = {
          from: s.at, to: s.at + span, serverAway, shards: s.shards.flatMap((shard, i) => (current[i] < 2 ? [{ shard: i, acting: shard.acting, states: shard.states }] : [])),
        };
        belowTwo.push(open);
      } else {
        open.to = s.at + span;
        open.serverAway ||= serverAway;
      }
    } else open = null;
    const short = s.shards.filter((shard, i) => current[i] * 2 <= Object.keys(shard.states).length);
    if (short.length > 0) {
      noMajorityMs += span;
      noMajorityBy[short.some(away) ? 'serverAway' : 'allConnected'] += span;
    }
  });
  // A pod that turned Ready while its server had a replica that was not up to date, in the nearest sample before.
  const readyTooEarly = podEvents.filter((e) => e.event === 'ready').filter((e) => {
    const before = [...good].reverse().find((s) => s.at <= e.at);
    const server = e.pod.replace(/-/g, '_');
    return before?.shards.some((shard) => server in shard.states && !upToDate(shard.states[server])) ?? false;
  }).map((e) => e.pod);
  return {
    handovers,
    secondsBelowTwoUpToDate: belowTwoMs / 1000,
    secondsWithoutUpToDateMajority: noMajorityMs / 1000,
    secondsWithoutUpToDateMajorityBy: { serverAway: noMajorityBy.serverAway / 1000, allConnected: noMajorityBy.allConnected / 1000 },
    readyTooEarly,
    belowTwo,
    unreadableSamples: samples.length - good.length,
  };
}

// Pure: failed operations per pod window, from each pod's stop until the next pod's stop (the last until the end).
// records: [{ startMs, ok }] on a clock whose zero is t0Wall (ms since the epoch); stops: [{ at, pod }] (epoch ms).
export function failuresPerPod(records, stops, t0Wall) {
  const ordered = [...stops].sort((a, b) => a.at - b.at);
  return ordered.map((stop, i) => {
    const from = stop.at - t0Wall;
    const to = i + 1 < ordered.length ? ordered[i + 1].at - t0Wall : Infinity;
    return { pod: stop.pod, failed: records.filter((rec) => !rec.ok && rec.startMs >= from && rec.startMs < to).length };
  });
}
