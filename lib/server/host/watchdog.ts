/**
 * The watchdog: what ends the server's process trees when the server itself
 * is SIGKILLed (a SIGKILLed subreaper cannot end anything, and its orphans
 * go to `init`).
 *
 * Right after the first spawn the server starts one small `/bin/sh` in its own
 * session (so signals to the server's process group or terminal do not reach
 * it), ignoring INT, TERM, HUP and the terminal stop signals, with empty
 * environment, `/` as working directory, `/dev/null` as output, and a pipe
 * from the server as its only input. The server writes `pid starttime` (the
 * starttime is field 22 of `/proc/<pid>/stat`, so a recycled pid never
 * matches) for every process leader it spawns and for every orphan the
 * subreaper adopted; orphans are looked for {@linkcode WATCHDOG_SOON_MS} ms
 * after a leader ends or is terminated (calls merged), and once every
 * {@linkcode WATCHDOG_SCAN_MS} ms while the server has a leader or an orphan.
 *
 * When its input ends without a `bye` line the server died: the watchdog
 * SIGSTOPs every recorded process whose starttime still matches, then their
 * descendants (from `/proc/<pid>/task/<tid>/children`) until no new one
 * appears, SIGKILLs all of them and exits. A clean shutdown writes `bye`
 * first, and the watchdog just exits. It never signals a process it was not
 * told about (other than a descendant of one), nor one whose starttime
 * differs; its list is pruned of ended processes as it grows, so it stays
 * proportional to the live ones.
 *
 * The residual: an orphan created less than one scan period before the
 * server's SIGKILL is not yet recorded and survives.
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
 * The watchdog's program (`sh -c`), reading `pid starttime` lines on its
 * stdin. `alive PID START` tells whether the process still has that
 * starttime (reads with builtins only); the list is `pid:start` words,
 * pruned of ended processes once it doubled.
 */
export const WATCHDOG_SCRIPT = `trap '' INT TERM HUP QUIT TSTP TTIN TTOU
alive() {
  w=$2
  { read -r s < "/proc/$1/stat"; } 2>/dev/null || return 1
  set -- \${s##*) }
  [ "\${20}" = "$w" ]
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
  alive "$p" "\${e#*:}" || continue
  kill -STOP "$p" 2>/dev/null
  if alive "$p" "\${e#*:}"; then stopped="$stopped $p"; else kill -CONT "$p" 2>/dev/null; fi
done
round=0
grown=1
while [ -n "$grown" ] && [ "$round" -lt 100 ]; do
  grown=
  round=$((round + 1))
  for p in $stopped; do
    for t in /proc/$p/task/*/children; do
      kids=
      { read -r kids < "$t"; } 2>/dev/null
      for c in $kids; do
        case " $stopped " in *" $c "*) continue ;; esac
        kill -STOP "$c" 2>/dev/null
        stopped="$stopped $c"
        grown=1
      done
    done
  done
done
[ -n "$stopped" ] && kill -KILL $stopped 2>/dev/null
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
  if (!libcAvailable()) return undefined;
  const fds = new Int32Array(2);
  if (pipeFds(fds, C.O_CLOEXEC) !== 0) return undefined;
  const [readEnd, writeEnd] = [fds[0]!, fds[1]!];
  try {
    // A stopped watchdog must not block the server: unwritten lines wait in `pending`.
    fileControl(writeEnd, C.F_SETFL, C.O_NONBLOCK);
    const devNull = openDevNull(C.O_RDWR);
    if (devNull < 0) throw new Error("/dev/null cannot be opened");
    try {
      const pid = spawnInNewSession("/bin/sh", [WATCHDOG_ARG0, "-c", WATCHDOG_SCRIPT], [], "/", [
        { dup: readEnd },
        { dup: devNull },
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
 * Starts the watchdog on the next turn of the event loop (binding libc and
 * spawning take milliseconds that the first `process/start` answer should
 * not wait for), then tells it every leader and orphan alive.
 */
function startSoon(): void {
  if (kick !== undefined) return;
  // On the runtime's own timers ({@linkcode deadline}, which keep no process alive either): the
  // first `setTimeout` of a process compiles Deno's Node timer functions.
  kick = deadline(0, () => {
    kick = undefined;
    if (dog !== undefined) return;
    dog = start();
    if (dog === undefined) return;
    for (const pid of leaderPids()) {
      const stat = statOf(pid);
      if (stat !== undefined) send(`${pid} ${stat.starttime}\n`);
    }
    scanOrphans();
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

/**
 * Records a process leader the server just spawned (the first call starts
 * the watchdog, which is then told of it; nothing happens without FFI).
 *
 * @param pid The leader's pid.
 */
export function watchLeader(pid: number): void {
  if (dog === undefined) {
    startSoon();
    return;
  }
  const stat = statOf(pid);
  if (stat === undefined) return;
  send(`${pid} ${stat.starttime}\n`);
  schedule();
}

/**
 * Records the orphans adopted since the last call, and keeps looking every
 * {@linkcode WATCHDOG_SCAN_MS} ms while the server has a leader or an orphan.
 */
function scanOrphans(): void {
  if (dog === undefined) return;
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
  if (dog === undefined) return;
  clearTimeout(timer);
  timer = undefined;
  send("bye\n");
  forget(dog);
}
