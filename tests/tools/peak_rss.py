#!/usr/bin/env python3
"""Runs a command and prints its peak resident set size in KiB on the last lines of stderr:
proc_hwm_kib, the VmHWM of /proc/PID/status (what top and ps report as the high-water
mark) sampled every 5 ms while it runs, and peak_rss_kib, getrusage of the one waited
child (the kernel's same high-water mark, read at its exit, so a peak in the last 5 ms
counts too; it starts from this Python's own RSS, ~14 MiB, which the forked child had
before exec, so it can only overstate). Each sample also reads /proc/PID/maps: the last
lines say in how many of the samples (`samples`) a file whose name ends in .pcap or .pcapng
was mapped (`pcap_mapped_samples`), so that a test can tell a mapped run from a read one.
Exits with the command's status."""
import resource
import subprocess
import sys
import time


def vm_hwm(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def maps_a_capture(pid):
    try:
        with open(f"/proc/{pid}/maps") as f:
            return any(line.rstrip().endswith((".pcap", ".pcapng")) for line in f)
    except OSError:
        return False


p = subprocess.Popen(sys.argv[1:])
hwm, samples, mapped = 0, 0, 0
while p.poll() is None:
    hwm = max(hwm, vm_hwm(p.pid))
    samples += 1
    mapped += maps_a_capture(p.pid)
    time.sleep(0.005)
print(f"samples={samples}", file=sys.stderr)
print(f"pcap_mapped_samples={mapped}", file=sys.stderr)
print(f"proc_hwm_kib={hwm}", file=sys.stderr)
print(f"peak_rss_kib={resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}", file=sys.stderr)
sys.exit(p.returncode)
