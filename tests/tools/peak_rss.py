#!/usr/bin/env python3
"""Runs a command and prints its peak resident set size in KiB on the last line of stderr
(getrusage of the one waited child: the kernel's high-water mark of its RSS, as
/proc/PID/status VmHWM shows while it runs). Exits with the command's status."""
import resource
import subprocess
import sys

p = subprocess.run(sys.argv[1:])
print(f"peak_rss_kib={resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}", file=sys.stderr)
sys.exit(p.returncode)
