#!/usr/bin/env python3
"""The Python of benches/compare.sh, kept out of bash's quotes.

Python inside `python3 -c "..."` once lost its second half to a double quote in a comment
(bash ended the string there, with no error): compare.sh now only calls this file, with
every value as an argument.

  compare_report.py drop FILE
      write FILE back to disk and drop it from the page cache (PAGE_CACHE=disk)
  compare_report.py rounds RUNS NAME=CMD ...
      time the commands in rounds (see `rounds` below); one line per command
  compare_report.py row CAP NAME PACKETS WALL CPU BYTES RSS_KIB MEDIAN SPREAD
      one row of the table
  compare_report.py ratio A B
      A / B to three decimals
  compare_report.py full-rpcs GB
      bench RPCs a client for a full-payload capture of about GB gigabytes
  compare_report.py parallel CAP CORES A1 AN D1 DN CPU_A1 CPU_AN CPU_D1 CPU_DN CEIL
      the parallel speed-up lines (walls comma-separated; CEIL: the walls of CORES
      one-thread runs at once)
  compare_report.py mapped CAP DECODE_MAPPED DECODE ANALYZE1_MAPPED ANALYZE1
      mapped against read, round by round
"""

import os
import statistics
import subprocess
import sys
import time


def drop(path):
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def hwm(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("VmHWM:")), 0)
    except OSError:
        return 0


def resident(path):
    """Bytes of PATH in the page cache (fincore, util-linux), or None without fincore."""
    try:
        out = subprocess.run(["fincore", "-nb", "-o", "RES", path], capture_output=True, text=True, check=True)
        return int(out.stdout.split()[0])
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
        return None


# Notes printed once a run (`warm`).
WARNED = {}


def warm(paths, taken):
    """Reads back into the page cache whatever of each capture in PATHS is no longer
    there, and adds what was missing to TAKEN[path]. On the VM of 2026-12-01 the host took
    pages back from an idle process's page cache with 22 GiB free: 213 of 227 MiB of the
    header-only capture were left minutes after it was read whole, 219 of 227 another
    time, so a timed run read the rest from disk, whichever tool's turn it was."""
    for f in paths:
        size = os.path.getsize(f)
        have = resident(f)
        if have is None:
            # Without fincore nothing tells what is missing: reading every file whole
            # before every run would cost more than it measures (27 reads of 6 GB).
            if not WARNED.get("fincore"):
                WARNED["fincore"] = True
                print(f"compare_report: fincore (util-linux) is missing or failed on {f}: captures are not read back "
                      "into the page cache before each run; pages the host evicts are read from disk in the timed "
                      "runs", file=sys.stderr)
            return
        if have >= size:
            continue
        taken[f] = taken.get(f, 0) + size - have
        if os.environ.get("PAGE_CACHE") == "tcpdump" and not WARNED.get("folios"):
            WARNED["folios"] = True
            print("compare_report: pages read back into the page cache come as a read brings them (large folios), "
                  "not as tcpdump wrote them: part of the file is then in the disk state (see the #warm lines)",
                  file=sys.stderr)
        with open(f, "rb", buffering=0) as fd:
            while fd.read(1 << 20):
                pass


def captures(cmd):
    """The capture files a command reads: its arguments that are .pcap/.pcapng files."""
    return [a for a in cmd.split() if a.endswith((".pcap", ".pcapng")) and os.path.isfile(a)]


def rounds(runs, specs):
    """RUNS rounds, each running every command once, in an order rotated by one every
    round, so that the VM's drift (10-25 % within minutes here) falls on every tool alike;
    then one run of each whose VmHWM (/proc/PID/status) is sampled every 2 ms (not
    getrusage: a child's ru_maxrss starts with the forked parent's, Python's ~14 MiB,
    before exec). Prints per command "NAME median_wall_s peak_rss_kib q1 med q3 walls
    cpu": the quartiles of its per-round speed relative to the first command (1 1 1 for
    it), its walls, comma-separated, and the median CPU time (user + system, from the
    child's own rusage by wait4) of its rounds. Commands are split on spaces. Before each
    timed run the captures the command names are read back into the page cache where the
    host took pages of them (`warm`), so that every run reads from memory; a "#warm" line
    says how much had to be read back in all."""
    cmds = [a.split("=", 1) for a in specs]
    walls = {n: [] for n, _ in cmds}
    cpus = {n: [] for n, _ in cmds}
    # Single-thread commands run pinned to one core, the same for all of them in a round
    # and the next core the next round: a VM's cores need not run at one speed
    # (2026-11-28 here: one core took 0.18-0.19 s for a run the other did in 0.14-0.15 s),
    # and a ratio of two tools each left where the scheduler put it would compare the
    # cores too. The multi-thread commands (UNPINNED) and the copies of the ceiling are
    # not pinned. PIN=0 pins nothing.
    allowed = sorted(os.sched_getaffinity(0))
    unpinned = set(os.environ.get("UNPINNED", "").split())
    pin = os.environ.get("PIN", "1") != "0"
    per_core = {}
    taken = {}
    with open(os.devnull, "wb") as null:
        for r in range(runs):
            core = allowed[r % len(allowed)]
            for n, c in cmds[r % len(cmds):] + cmds[:r % len(cmds)]:
                # NAME*K: K copies at once ({i} in the command numbers them); the wall
                # time until the last ends, the CPU time of all.
                copies = int(n.split("*")[1]) if "*" in n else 1
                pinned = pin and copies == 1 and n not in unpinned
                pre = (lambda: os.sched_setaffinity(0, {core})) if pinned else None
                warm(captures(c), taken)
                t = time.perf_counter()
                ps = [subprocess.Popen(c.replace("{i}", str(i)).split(), stdin=subprocess.DEVNULL, stdout=null,
                                       stderr=null, preexec_fn=pre)
                      for i in range(copies)]
                cpu = 0.0
                for p in ps:
                    _, status, ru = os.wait4(p.pid, 0)
                    cpu += ru.ru_utime + ru.ru_stime
                    if os.waitstatus_to_exitcode(status) != 0:
                        sys.exit(f"failed ({os.waitstatus_to_exitcode(status)}): {c}")
                walls[n].append(time.perf_counter() - t)
                cpus[n].append(cpu)
                if pinned:
                    per_core.setdefault(n, {}).setdefault(core, []).append(walls[n][-1])
        for n, by in per_core.items():
            # Each pinned command's median wall time on each core: how far the cores differ.
            if len(by) > 1:
                print("#core", n, " ".join(f"cpu{k} {statistics.median(v):.3f}" for k, v in sorted(by.items())))
        for n, c in cmds:
            if "*" in n:
                print(n, f"{statistics.median(walls[n]):.4f}", 0, "- - -", ",".join(f"{w:.4f}" for w in walls[n]),
                      f"{statistics.median(cpus[n]):.3f}")
                continue
            p = subprocess.Popen(c.split(), stdin=subprocess.DEVNULL, stdout=null, stderr=null)
            time.sleep(0.001)
            rss = 0
            while p.poll() is None:
                rss = max(rss, hwm(p.pid))
                time.sleep(0.002)
            ref = walls[cmds[0][0]]
            rel = sorted(a / b for a, b in zip(ref, walls[n]))
            print(n, f"{statistics.median(walls[n]):.4f}", rss, " ".join(f"{x:.3f}" for x in quartiles(rel)),
                  ",".join(f"{w:.4f}" for w in walls[n]), f"{statistics.median(cpus[n]):.3f}")
        # Last, after every command's line (a caller may read only the first).
        for f, b in sorted(taken.items()):
            print("#warm", os.path.basename(f), f"{b / 2**20:.1f}")


def q(r, f):
    """The value a fraction f into a sorted list (the rounds' quartiles)."""
    return r[min(len(r) - 1, int(f * len(r)))]


def quartiles(r):
    """(q1, median, q3) of a sorted list."""
    return q(r, 0.25), statistics.median(r), q(r, 0.75)


def walls(s):
    return [float(x) for x in s.split(",")]


def row(cap, name, packets, wall, cpu, size, rss, med, spread):
    pk, s, b = int(packets), float(wall), int(size)
    print("%-12s %-22s %9d %8.3f %7.3f %12.0f %7.2f %7.0f MiB %11sx %s"
          % (cap, name, pk, s, float(cpu), pk / s, b / s / 1e9, int(rss) / 1024, med, spread))


def parallel(cap, cores, a1, an, d1, dn, cpu_a1, cpu_an, cpu_d1, cpu_dn, ceil):
    n = int(cores)
    a1, an, d1, dn, ceil = walls(a1), walls(an), walls(d1), walls(dn), walls(ceil)
    for name, one, many, c1, cn in (("lnetcap analyze", a1, an, cpu_a1, cpu_an),
                                    ("lnetcap decode", d1, dn, cpu_d1, cpu_dn)):
        r = sorted(a / b for a, b in zip(one, many))
        lo, med, hi = quartiles(r)
        print("%-12s %-22s %d threads against 1: %.2fx (per round: %.2f-%.2f), for %.2fx the CPU time"
              % (cap, name, n, med, lo, hi, float(cn) / float(c1)))
    cpu = float(cpu_an) / float(cpu_a1)
    cpu_d = float(cpu_dn) / float(cpu_d1)
    # The same work took far more CPU time: the host ran something else on these cores,
    # or they pass data between them slowly (README Speed, How it is measured: 1.06-1.27x
    # in undisturbed runs on the 2-core AMD VM, 2-2.5x in disturbed ones, whose
    # two-thread times were slower than one thread's).
    if cpu > 1.5:
        print("%-12s %-22s warning: the %d-thread runs took %.2fx the CPU time of one thread (over 1.5x): "
              "the host disturbed them, or its cores pass data between them slowly (README Speed); "
              "rerun before quoting the parallel rows" % (cap, "lnetcap analyze", n, cpu))
    # decode's engine does more work than analyze's relative to one thread (about 1.34x
    # one thread's instructions on the header-only capture, README Speed, Parallel
    # decode): its threshold is higher.
    if cpu_d > 1.7:
        print("%-12s %-22s warning: the %d-thread runs took %.2fx the CPU time of one thread (over 1.7x): "
              "the host disturbed them (README Speed); rerun before quoting the parallel rows"
              % (cap, "lnetcap decode", n, cpu_d))
    # The most these cores give this work here: one-thread runs at once, one a core,
    # against one run alone (shared caches, memory bandwidth and the host's scheduling of
    # a VM's cores all count); the parallel run against that ceiling, round by round.
    c = sorted(n * a / b for a, b in zip(a1, ceil))
    e = sorted(p / (n * m) for m, p in zip(an, ceil))
    c_lo, c_med, c_hi = quartiles(c)
    e_lo, e_med, e_hi = quartiles(e)
    print("%-12s %-22s %d one-thread runs at once: %.2fx the throughput of one (per round: %.2f-%.2f), "
          "the ceiling of %d cores here; the %d-thread run reaches %.0f %% of it (per round: %.0f-%.0f %%)"
          % (cap, "lnetcap analyze", n, c_med, c_lo, c_hi, n, n, 100 * e_med, 100 * e_lo, 100 * e_hi))
    # Over the core count: each of the runs at once went faster than one run alone, which
    # more cores cannot explain (the Intel VM of README Speed: 2.0-2.7x, and two runs at
    # once ended before one alone in paired rounds, 1.08x; a busy loop on the other core
    # did not do that). The ceiling then measures the host, and the share of it
    # understates.
    if c_med > n * 1.05:
        print("%-12s %-22s note: the ceiling is over %d: each of %d runs at once went faster than one run "
              "alone, which cores alone cannot give (README Speed); the parallel run's share of it "
              "understates it: quote the speed-up against one thread" % (cap, "lnetcap analyze", n, n))


def mapped(cap, dm, d, am, a):
    """Mapped against read, round by round (LNETCAP_MAP=1's speed over the default's)."""
    for name, m, rd in (("decode", walls(dm), walls(d)), ("analyze (1)", walls(am), walls(a))):
        lo, med, hi = quartiles(sorted(b / x for x, b in zip(m, rd)))
        print("%-12s %-22s mapped against read: %.2fx (per round: %.2f-%.2f)"
              % (cap, "lnetcap " + name, med, lo, hi))


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == "drop":
        drop(*args)
    elif cmd == "rounds":
        rounds(int(args[0]), args[1:])
    elif cmd == "row":
        row(*args)
    elif cmd == "ratio":
        print(f"{float(args[0]) / float(args[1]):.3f}")
    elif cmd == "full-rpcs":
        # One full-payload bench RPC per client writes about 9.12 MB (measured: --rpcs 120
        # gives 1,094 MB).
        print(max(1, round(float(args[0]) * 1e9 / 9.12e6)))
    elif cmd == "parallel":
        parallel(*args)
    elif cmd == "mapped":
        mapped(*args)
    else:
        sys.exit(f"compare_report.py: no command {cmd}")


if __name__ == "__main__":
    main(sys.argv)
