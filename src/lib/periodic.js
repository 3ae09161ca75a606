// Periodic work as named jobs: one place that catches and logs a job's failure, and one place that runs jobs on
// timers. A job is { name, run, fallback, failure }: run() does one round; if it throws, the failure is logged with
// the job's name and message `failure`, and the round's result for it is `fallback` (the job runs again next round).

// One round: each job in order, each on its own (a failed job does not stop the next). Returns { [name]: result }.
export async function runJobs(jobs, log) {
  const results = {};
  for (const job of jobs) {
    try {
      results[job.name] = await job.run();
    } catch (err) {
      log.warn({ job: job.name, err: err.message }, job.failure ?? `${job.name} failed; retried next round`);
      results[job.name] = job.fallback ?? null;
    }
  }
  return results;
}

// Runs each of `timers` ({ name, intervalMs, run }) every intervalMs, never overlapping itself and never throwing
// out of the timer (run() is expected to log its own failures). Returns stop(), which clears every timer.
export function startTimers(timers, { setInterval: every = setInterval, clearInterval: clear = clearInterval } = {}) {
  const handles = timers.map(({ intervalMs, run }) => {
    let running = false;
    return every(() => {
      if (running) return;
      running = true;
      Promise.resolve().then(run).catch(() => {}).finally(() => { running = false; });
    }, intervalMs);
  });
  return () => { for (const handle of handles) clear(handle); };
}
