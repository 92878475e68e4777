#!/usr/bin/env python3
"""Replays a pcap capture onto an interface at its recorded timing (tests/live.rs).

    replay.py CAPTURE IFACE [--speed X]

Each frame leaves at start + (its timestamp - the first one's) / speed on an absolute
schedule (a late frame does not delay the next ones), through an AF_PACKET raw socket.
Raw-IP captures (link type 101, 228, 229, 12) get an Ethernet header (locally
administered MACs) so they can travel on a veth; Ethernet captures go as they are. Reads
pcap (µs or ns, either byte order), plain, gzip or zstd (through the zstd command).
tcpreplay was tried first: on a 2-core machine its pacing stretched a 2.5 s capture by
9 % (gtod) to 97 % (nano, select), too far for a test that compares throughput within 1 %.
Prints the frames sent, the replay's wall time, the recorded span, and how late the
frame sent furthest behind its schedule left ("worst lateness X ms"): frames that leave late
bunch up, which shortens the gaps a capture measures round trips from, so a test that
compares timing-dependent results with the original reads it before it does.
"""
import gzip
import socket
import struct
import subprocess
import sys
import time


def read(path):
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    elif raw[:4] == b"\x28\xb5\x2f\xfd":
        raw = subprocess.run(["zstd", "-dc", path], check=True, capture_output=True).stdout
    magic = raw[:4]
    end = {b"\xd4\xc3\xb2\xa1": "<", b"\x4d\x3c\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">", b"\xa1\xb2\x3c\x4d": ">"}.get(magic)
    if end is None:
        sys.exit(f"replay.py: {path}: not a pcap file (pcapng is not supported here)")
    div = 1e9 if magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d") else 1e6
    linktype = struct.unpack(end + "I", raw[20:24])[0] & 0x0FFFFFFF
    out, off = [], 24
    while off + 16 <= len(raw):
        sec, frac, caplen, _ = struct.unpack(end + "IIII", raw[off:off + 16])
        data = raw[off + 16:off + 16 + caplen]
        off += 16 + caplen
        if linktype in (101, 228, 229, 12):
            ethertype = b"\x08\x00" if data[0] >> 4 == 4 else b"\x86\xdd"
            data = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01" + ethertype + data
        elif linktype != 1:
            sys.exit(f"replay.py: {path}: link type {linktype} cannot be replayed on Ethernet")
        out.append((sec + frac / div, data))
    return out


def main():
    args = sys.argv[1:]
    speed = 1.0
    if "--speed" in args:
        i = args.index("--speed")
        speed = float(args[i + 1])
        del args[i:i + 2]
    frames = read(args[0])
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((args[1], 0))
    t0 = frames[0][0]
    start = time.perf_counter()
    worst = 0.0
    for ts, data in frames:
        due = start + (ts - t0) / speed
        while True:
            left = due - time.perf_counter()
            if left <= 0:
                break
            # Sleep through all but the last 100 µs (Linux wakes within ~60 µs): a busy
            # wait would take a whole core from the capture and the kernel's receive path.
            if left > 0.0002:
                time.sleep(left - 0.0001)
        # The last look at the clock says how late this frame leaves (no extra call).
        if -left > worst:
            worst = -left
        s.send(data)
    wall = time.perf_counter() - start
    print(f"sent {len(frames)} frames in {wall:.3f} s (recorded span {frames[-1][0] - t0:.3f} s); "
          f"worst lateness {worst * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
