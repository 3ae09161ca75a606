// What an operator reads when a port cannot be listened on: which port, and why, instead of a crash further on.

// key: the configuration key that chose the port (PORT, WEBHOOK_PORT), named in what to do.
export function listenFailureMessage(err, { what, host, port, key = null }) {
  const where = `${host ?? '0.0.0.0'}:${port}`;
  const set = key ? `set ${key} to a free port` : 'set a free port';
  if (err.code === 'EADDRINUSE') return `the ${what} port ${where} is already in use (another process listens there; ${set})`;
  if (err.code === 'EACCES') return `the ${what} port ${where} needs privileges this process lacks (${key ? `set ${key} above 1023` : 'use a port above 1023'})`;
  if (err.code === 'EADDRNOTAVAIL') return `the ${what} address ${where} is not an address of this host`;
  return `the ${what} server cannot listen on ${where}: ${err.message}`;
}
