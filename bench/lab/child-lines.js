// The first JSON line a child process prints that contains `marker` (its "listening" line, with its port), for the
// benchmarks and the evaluation that start the gate or a relay as a child.

// Resolves with that line, parsed; then stops reading (and lets the rest of the output flow). Rejects if the child
// exits first. what: the child, for the error.
export function firstJsonLine(child, { what, marker }) {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (chunk) => {
      text += chunk;
      const line = text.split('\n').find((l) => l.startsWith('{') && l.includes(marker));
      if (!line) return;
      child.stdout.off('data', onData);
      child.stdout.resume();
      resolve(JSON.parse(line));
    };
    child.stdout.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${what} exited (${code}) before it printed its "${marker}" line`)));
  });
}
