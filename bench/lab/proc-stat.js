// A process's CPU time from /proc/<pid>/stat: utime + stime, in clock ticks (USER_HZ, 100 on Linux), as seconds.
import { readFileSync } from 'node:fs';

const CLOCK_TICKS_PER_SECOND = 100;

export function cpuSecondsOf(pid) {
  const { user, system } = cpuTimesOf(pid);
  return user + system;
}

// The same, apart: { user, system } seconds.
export function cpuTimesOf(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) is in parentheses and may hold spaces: the fields are counted after its last ')'.
  const [utime, stime] = stat.slice(stat.lastIndexOf(')') + 2).split(' ').slice(11, 13).map(Number);
  return { user: utime / CLOCK_TICKS_PER_SECOND, system: stime / CLOCK_TICKS_PER_SECOND };
}
