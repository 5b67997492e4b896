#!/usr/bin/env python3
"""`netns-cluster watch`: each host's link, both ways, sampled from the
bridge's ports (run inside the bridge's namespace, where port hN's received
bytes are host N's uplink and its sent bytes host N's downlink).

Prints one line per interval with every direction's use of the link rate,
then (also when stopped early by SIGINT or SIGTERM), over the intervals
when any link carried traffic, each direction's
mean use and the time when at most one uplink ran at half the rate or more
(one host sending alone while the others wait on it). It reads counters
only; it never changes the cluster."""
import argparse
import glob
import os
import signal
import sys
import time

stopped = False


def stop(_signum, _frame):
    global stopped
    stopped = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("seconds", type=float)
    ap.add_argument("--every", type=float, default=25.0, help="interval, ms")
    ap.add_argument("--rate", type=float, required=True, help="each link's rate, bit/s")
    ap.add_argument("--quiet", action="store_true", help="the summary only")
    a = ap.parse_args()
    ports = sorted(glob.glob("/sys/class/net/h[0-9]*"), key=lambda p: int(os.path.basename(p)[1:]))
    if not ports:
        sys.exit("netns-cluster watch: the bridge has no host ports (is the cluster up?)")
    names = [os.path.basename(p) for p in ports]
    files = [(open(p + "/statistics/rx_bytes"), open(p + "/statistics/tx_bytes")) for p in ports]

    def read():
        out = []
        for up, down in files:
            up.seek(0)
            down.seek(0)
            out += [int(up.read()), int(down.read())]
        return time.monotonic(), out

    bytes_per_s = a.rate / 8
    if not a.quiet:
        print("    s  " + " ".join(f"{n + ' up':>8} {n + ' dn':>8}" for n in names), flush=True)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    start, prev = read()
    prev_t, end = start, start + a.seconds
    active, busy, alone = 0.0, [0.0] * (2 * len(names)), 0.0
    while prev_t < end and not stopped:
        time.sleep(a.every / 1e3)
        now, vals = read()
        dt = now - prev_t
        use = [(v - b) / dt / bytes_per_s for v, b in zip(vals, prev)]
        if not a.quiet:
            print(f"{now - start:6.2f}  " + " ".join(f"{u:8.0%}" for u in use), flush=True)
        if max(use) > 0.05:
            active += dt
            busy = [b + u * dt for b, u in zip(busy, use)]
            uplinks = sorted(use[0::2], reverse=True)
            if len(uplinks) > 1 and uplinks[1] < 0.5:
                alone += dt
        prev_t, prev = now, vals
    if active == 0:
        print("no traffic on any link")
        return
    print(f"over {active:.2f} s with traffic: mean use of the link rate")
    for i, n in enumerate(names):
        print(f"  {n}: up {busy[2 * i] / active:.0%}, down {busy[2 * i + 1] / active:.0%}")
    print(f"  at most one uplink at half the rate or more: {alone:.2f} s ({alone / active:.0%})")


if __name__ == "__main__":
    main()
