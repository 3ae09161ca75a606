// What an operator reads when a port cannot be listened on: which port, and why, instead of a crash further on.

export function listenFailureMessage(err, { what, host, port }) {
  const where = `${host ?? '0.0.0.0'}:${port}`;
  if (err.code === 'EADDRINUSE') return `the ${what} port ${where} is already in use (another process listens there; set a free port)`;
  if (err.code === 'EACCES') return `the ${what} port ${where} needs privileges this process lacks (use a port above 1023)`;
  if (err.code === 'EADDRNOTAVAIL') return `the ${what} address ${where} is not an address of this host`;
  return `the ${what} server cannot listen on ${where}: ${err.message}`;
}
