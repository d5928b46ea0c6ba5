/**
 * The watchdog: what ends the server's process trees when the server itself
 * is SIGKILLed (a SIGKILLed subreaper cannot end anything, and its orphans
 * go to `init`).
 *
 * Before the server's first spawn (so that no process of the server exists
 * without one) it starts one small `/bin/sh` in its own session (so signals
 * to the server's process group or terminal do not reach it), ignoring INT,
 * TERM, HUP and the terminal stop signals, with empty environment, `/` as
 * working directory, `/dev/null` as output, and a pipe from the server as
 * its only input; its one argument is the server's mark instance
 * (`spawn_mark.ts`). The server writes `pid starttime` (the starttime is
 * field 22 of `/proc/<pid>/stat`, so a recycled pid never matches) for every
 * process leader it spawns and for every orphan the subreaper adopted;
 * orphans are looked for {@linkcode WATCHDOG_SOON_MS} ms after a leader ends
 * or is terminated (calls merged), and once every {@linkcode WATCHDOG_SCAN_MS}
 * ms while the server has a leader or an orphan, when a dead watchdog is also
 * replaced.
 *
 * When its input ends without a `bye` line the server died. The watchdog
 * then stops (SIGSTOP: a stopped process cannot fork) every recorded process
 * whose starttime still matches, and every process on the host whose soft
 * `RLIMIT_RTTIME` is a mark of the server's instance: all its descendants,
 * wherever the kernel re-parented them, whatever session or environment they
 * made themselves. Then, in rounds until one finds nothing new, the children
 * of every stopped process and marked processes forked meanwhile; each is
 * identified, once stopped, by its pid and starttime (a child also by its
 * parent, a marked process by its mark read again). Finally every stopped
 * process whose starttime still matches is SIGKILLed, and it exits. A clean
 * shutdown writes `bye` first, and the watchdog just exits. It never signals
 * a process it was not told about other than a marked one or a descendant of
 * one; a pid reused between its check and its SIGSTOP is continued again,
 * never killed. Its list is pruned of ended processes as it grows, so it
 * stays proportional to the live ones; the scan for marks, once per round,
 * only after the server died, reads `/proc/<pid>/limits` only of processes
 * that started no earlier than the server (a mark is inherited, never older
 * than the server that set it): `sh` reads a file a byte at a time, and the
 * limits are 1.4 KB against the 0.3 KB of `/proc/<pid>/stat` that tells the
 * start. On the project's 2-core VM one round over 900 processes older than
 * the server takes 0.5 s this way, 1.7 s reading the limits of each.
 *
 * What still survives a server SIGKILL: a process that set its own soft
 * `RLIMIT_RTTIME` (dropping its mark) and was then re-parented to the
 * server less than one scan before the kill, and everything once the
 * watchdog itself was killed (one of the server's processes can do it) until
 * the next scan replaces it. `--process-namespace` has neither gap.
 *
 * @module
 */

import {
  C,
  closeFd,
  errno,
  fileControl,
  libcAvailable,
  openDevNull,
  pipeFds,
  spawnInNewSession,
  waitChild,
  writeFd,
} from "./libc.ts";
import { leaderPids, orphans, statOf, trackHelper } from "./proc.ts";
import { deadline } from "./deadline.ts";
import { grantedEverywhere } from "./permissions.ts";
import { markInstance } from "./spawn_mark.ts";

/** The watchdog's `argv[0]`: how `ps` (and the tests) tell it from the server's processes. */
export const WATCHDOG_ARG0 = "exec-server-watchdog";

/** How often orphans are looked for while the server has processes, in ms. */
export const WATCHDOG_SCAN_MS = 1000;

/** How soon orphans are looked for after a leader ended or was terminated, in ms. */
export const WATCHDOG_SOON_MS = 100;

/** Most characters queued for a watchdog that does not read. */
export const MAX_PENDING_CHARS = 1 << 20;

const EPIPE = 32;

/**
 * The watchdog's program (`sh -c`, with the mark instance as `$1`, empty without marks),
 * reading `pid starttime` lines on its stdin. `stat_of PID` sets `parent` and `began` (its starttime) from
 * `/proc/PID/stat`, `alive PID START` tells whether the process still has that starttime, and
 * `marked PID` whether its soft `RLIMIT_RTTIME` is one of the server's marks (all with builtins
 * only); `since` is the server's starttime (its parent's, read at its own start: if the server
 * died before, the reaper's, which is older still). Both lists are `pid:start` words; the
 * recorded one is pruned of ended processes once it doubled.
 */
export const WATCHDOG_SCRIPT = `trap '' INT TERM HUP QUIT TSTP TTIN TTOU
instance=$1
stat_of() {
  { read -r s < "/proc/$1/stat"; } 2>/dev/null || return 1
  set -- \${s##*) }
  parent=$2
  began=\${20}
}
since=0
stat_of "$PPID" && since=$began
alive() {
  stat_of "$1" && [ "$began" = "$2" ]
}
marked() {
  [ -n "$instance" ] || return 1
  while read -r a b c soft rest; do
    [ "$a $b $c" = "Max realtime timeout" ] || continue
    case $soft in *[!0-9]*) return 1 ;; [1-4]??????????????????) ;; *) return 1 ;; esac
    [ $(((4611686018427387904 - soft) >> 32)) = "$instance" ]
    return
  done 2>/dev/null < "/proc/$1/limits"
  return 1
}
held() {
  case " $stopped " in *" $1:"*) return 0 ;; esac
  return 1
}
list=
n=0
keep=64
while read -r pid start; do
  [ "$pid" = bye ] && exit 0
  case "$pid:$start" in *[!0-9:]* | :* | *:) continue ;; esac
  list="$list $pid:$start"
  n=$((n + 1))
  if [ "$n" -gt "$keep" ]; then
    kept=
    n=0
    for e in $list; do
      if alive "\${e%:*}" "\${e#*:}"; then kept="$kept $e"; n=$((n + 1)); fi
    done
    list=$kept
    keep=$((n * 2 + 64))
  fi
done
stopped=
for e in $list; do
  p=\${e%:*}
  held "$p" && continue
  alive "$p" "\${e#*:}" || continue
  kill -STOP "$p" 2>/dev/null
  if alive "$p" "\${e#*:}"; then stopped="$stopped $e"; else kill -CONT "$p" 2>/dev/null; fi
done
round=0
grown=1
while [ -n "$grown" ] && [ "$round" -lt 100 ]; do
  grown=
  round=$((round + 1))
  if [ -n "$instance" ]; then
    for d in /proc/[0-9]*; do
      p=\${d#/proc/}
      held "$p" && continue
      stat_of "$p" && [ "$began" -ge "$since" ] || continue
      marked "$p" || continue
      kill -STOP "$p" 2>/dev/null
      if marked "$p" && stat_of "$p"; then
        stopped="$stopped $p:$began"
        grown=1
      else
        kill -CONT "$p" 2>/dev/null
      fi
    done
  fi
  for e in $stopped; do
    p=\${e%:*}
    for t in /proc/$p/task/*/children; do
      kids=
      { read -r kids < "$t"; } 2>/dev/null
      for c in $kids; do
        held "$c" && continue
        kill -STOP "$c" 2>/dev/null
        if stat_of "$c" && [ "$parent" = "$p" ]; then
          stopped="$stopped $c:$began"
          grown=1
        else
          kill -CONT "$c" 2>/dev/null
        fi
      done
    done
  done
done
for e in $stopped; do
  alive "\${e%:*}" "\${e#*:}" && kill -KILL "\${e%:*}" 2>/dev/null
done
exit 0
`;

interface Watchdog {
  pid: number;
  /** The pipe's write end (non-blocking, close-on-exec). */
  fd: number;
  untrack: () => void;
}

let dog: Watchdog | undefined;
/** Lines the pipe did not take yet (the watchdog is behind). */
let pending = "";
/** `pid:starttime` of the orphans already written. */
let told = new Set<string>();
let timer: ReturnType<typeof setTimeout> | undefined;
let timerDue = 0;
/** Cancels the due start of the watchdog. */
let kick: (() => void) | undefined;

const encoder = new TextEncoder();

function start(): Watchdog | undefined {
  // The FFI grant is checked first: opening libc without it could prompt.
  if (!grantedEverywhere("ffi") || !libcAvailable()) return undefined;
  const fds = new Int32Array(2);
  if (pipeFds(fds, C.O_CLOEXEC) !== 0) return undefined;
  const [readEnd, writeEnd] = [fds[0]!, fds[1]!];
  try {
    // A stopped watchdog must not block the server: unwritten lines wait in `pending`.
    fileControl(writeEnd, C.F_SETFL, C.O_NONBLOCK);
    const devNull = openDevNull(C.O_RDWR);
    if (devNull < 0) throw new Error("/dev/null cannot be opened");
    try {
      const argv = [WATCHDOG_ARG0, "-c", WATCHDOG_SCRIPT, WATCHDOG_ARG0, `${markInstance() ?? ""}`];
      const pid = spawnInNewSession("/bin/sh", argv, [], "/", [
        { dup: readEnd },
        { dup: devNull },
        // The child's descriptor 1, /dev/null by then.
        { dup: 1 },
      ]);
      return { pid, fd: writeEnd, untrack: trackHelper(pid) };
    } finally {
      closeFd(devNull);
    }
  } catch {
    closeFd(writeEnd);
    return undefined;
  } finally {
    closeFd(readEnd);
  }
}

/** Collects the watchdog's exit if it has one, then forgets it. */
function forget(watchdog: Watchdog): void {
  closeFd(watchdog.fd);
  waitChild(watchdog.pid, new Int32Array(1), C.WNOHANG);
  watchdog.untrack();
  if (dog === watchdog) dog = undefined;
  pending = "";
  told = new Set();
}

/**
 * Queues `line` after `pending` and writes what the pipe takes; a line that would take the
 * queue past {@linkcode MAX_PENDING_CHARS} is dropped (a watchdog that does not read, being
 * stopped, cannot act either).
 *
 * @example
 * ```ts
 * import { queueLine } from "./watchdog.ts";
 * const full = () => 0; // the pipe takes nothing
 * console.log(queueLine("", "42 7\n", full)); // "42 7\n"
 * console.log(queueLine("42 7\n", "43 8\n", (bytes) => bytes.length)); // ""
 * ```
 *
 * @param pending What the pipe did not take yet.
 * @param line The line to send (ASCII).
 * @param write Writes bytes to the pipe: how many it took (0 when full), or `"broken"` when the
 * watchdog is gone.
 * @returns What is left queued, or `"broken"`.
 */
export function queueLine(
  pending: string,
  line: string,
  write: (bytes: Uint8Array<ArrayBuffer>) => number | "broken",
): string | "broken" {
  if (pending.length + line.length > MAX_PENDING_CHARS) return pending;
  const queued = pending + line;
  const written = write(encoder.encode(queued));
  // ASCII only: bytes and characters coincide.
  return written === "broken" ? written : queued.slice(written);
}

/** `write` to the watchdog's non-blocking pipe, for {@linkcode queueLine}. */
function writePipe(fd: number, bytes: Uint8Array<ArrayBuffer>): number | "broken" {
  const written = writeFd(fd, bytes);
  if (written >= 0) return written;
  return errno() === EPIPE ? "broken" : 0;
}

function send(line: string): void {
  if (dog === undefined) return;
  const { fd } = dog;
  const left = queueLine(pending, line, (bytes) => writePipe(fd, bytes));
  if (left !== "broken") {
    pending = left;
    return;
  }
  // The watchdog was killed: start another one, told everything that lives.
  forget(dog);
  startSoon();
}

/**
 * Starts a watchdog and tells it every leader and orphan alive. Without a leader there is no
 * orphan either: `/proc` is not read (its bindings, `fs_syscalls.ts`, take 2-3 ms, which the
 * first `process/start` answer should not wait for).
 */
function replace(): void {
  dog = start();
  if (dog === undefined || leaderPids().length === 0) return;
  for (const pid of leaderPids()) {
    const stat = statOf(pid);
    if (stat !== undefined) send(`${pid} ${stat.starttime}\n`);
  }
  scanOrphans();
}

/**
 * Starts the watchdog unless it runs (nothing happens without FFI): call it before a spawn, so
 * that no process of the server exists without one. The first call, with the first
 * `process/start`, spawns it: 0.2-0.5 ms of that answer (posix_spawn of `/bin/sh`, on the
 * project's 2-core VM).
 */
export function startWatchdog(): void {
  kick?.();
  kick = undefined;
  if (dog === undefined) replace();
}

/**
 * Starts a watchdog on the next turn of the event loop, in place of one found dead (not from
 * within the write that found it).
 */
function startSoon(): void {
  if (kick !== undefined) return;
  // On the runtime's own timers ({@linkcode deadline}, which keep no process alive either): the
  // first `setTimeout` of a process compiles Deno's Node timer functions.
  kick = deadline(0, () => {
    kick = undefined;
    if (dog === undefined) replace();
  });
}

/** Scans after `ms` (unless a scan is already due sooner); the timer does not keep the server up. */
function schedule(ms = WATCHDOG_SCAN_MS): void {
  const due = Date.now() + ms;
  if (timer !== undefined && timerDue <= due) return;
  clearTimeout(timer);
  timerDue = due;
  timer = setTimeout(() => {
    timer = undefined;
    scanOrphans();
  }, ms);
  Deno.unrefTimer(timer);
}

/** {@linkcode scanOrphans} within {@linkcode WATCHDOG_SOON_MS} ms (calls in between are merged). */
export function scanSoon(): void {
  if (dog !== undefined) schedule(WATCHDOG_SOON_MS);
}

/** Leaders spawned during this turn of the event loop, told to the watchdog on the next. */
let untold: number[] = [];

/**
 * Records a process leader the server just spawned. It is told to the watchdog on the next turn
 * of the event loop (reading its starttime binds the `/proc` calls, 2-3 ms, on the first spawn:
 * not part of the `process/start` answer); meanwhile its mark identifies it. Without a watchdog
 * one is started then, and told of every leader. Nothing happens without FFI.
 *
 * @param pid The leader's pid.
 */
export function watchLeader(pid: number): void {
  untold.push(pid);
  if (untold.length > 1) return;
  deadline(0, () => {
    const pids = untold;
    untold = [];
    // Closed meanwhile: nothing to tell.
    if (pids.length === 0) return;
    if (dog === undefined) return startSoon();
    for (const leader of pids) {
      const stat = statOf(leader);
      if (stat !== undefined) send(`${leader} ${stat.starttime}\n`);
    }
    schedule();
  });
}

/**
 * Records the orphans adopted since the last call, and keeps looking every
 * {@linkcode WATCHDOG_SCAN_MS} ms while the server has a leader or an orphan.
 */
function scanOrphans(): void {
  if (dog === undefined) return;
  // Killed (one of the server's processes can do it): replaced, and its successor told everything.
  if (waitChild(dog.pid, new Int32Array(1), C.WNOHANG) === dog.pid) {
    forget(dog);
    startSoon();
    return;
  }
  const seen = new Set<string>();
  for (const { pid, stat } of orphans()) {
    if (stat.state === "Z") continue;
    const key = `${pid}:${stat.starttime}`;
    seen.add(key);
    if (!told.has(key)) send(`${pid} ${stat.starttime}\n`);
  }
  // A watchdog found dead meanwhile is replaced, and its successor told everything.
  if (dog === undefined) return;
  told = seen;
  if (seen.size > 0 || leaderPids().length > 0) schedule();
}

/** Clean shutdown: tells the watchdog `bye` (it exits without signalling anything). */
export function closeWatchdog(): void {
  kick?.();
  kick = undefined;
  untold = [];
  if (dog === undefined) return;
  clearTimeout(timer);
  timer = undefined;
  send("bye\n");
  forget(dog);
}
