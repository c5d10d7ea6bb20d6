"""Throughput of dupfilter-smtpd in a real Postfix content-filter loop.

    python bench/smtpd_load.py                       # 5 rounds of 1000 messages per path
    python bench/smtpd_load.py --rounds 3 --messages 300 --sessions 8
    python bench/smtpd_load.py --rounds 3 --messages 600 --reference

One private Postfix instance (tests/support/postfix.py, as root, loopback only) has two entry
smtpd services that differ only in where their ``content_filter`` points:

    no-filter loop:  smtp-source ─► smtpd B ─► scan ─► smtpd R2 (re-injection) ─► sink
    dupfilter loop:  smtp-source ─► smtpd A ─► scan ─► dupfilter-smtpd ─► smtpd R ─► sink

With ``--reference`` a third entry passes its mail through bench/peers/minimal_relay.py
instead, an aiosmtpd filter that does nothing but relay (the least a content filter in
Python costs; the SMTP counterpart of the minimal milter):

    minimal relay loop: smtp-source ─► smtpd M ─► scan ─► minimal_relay.py ─► smtpd R3 ─► sink

(each filter with its own re-injection service: a filter's kept-open connections hold
that service's smtpd processes)

The fair baseline is the no-filter *loop*, not a plain smtpd: each message
there also passes cleanup, qmgr and smtp twice, so the difference is dupfilter-smtpd's own
cost.  Each round runs both paths once (the order alternates); a path's rate is messages
divided by the time from the first connection until the last message reached the sink.
The summary is the median of the per-round ratios (dupfilter / no-filter); the target is at
least 0.75 (the filter costs at most 25% of Postfix's throughput).  Every message is
counted at the sink: "lost" must be 0.

dupfilter-smtpd runs as its own process with default settings (tag every message) and a
fresh store; smtp-source sends identical bodies, so after the first message every one is a
duplicate (found by digest) and gets the header.

CPU columns: user+system time per message of all the instance's Postfix processes (master,
live children, and reaped children via the master's cutime) for each path, and of the
daemon.  "CPU ratio" = plain loop's Postfix CPU / (filter loop's Postfix CPU + daemon CPU):
the throughput ratio to expect where the CPUs are the limit.  On a machine shared with
other jobs both the wall-clock rates and the CPU times move; compare several runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))     # the repository's root: tests.support

from tests.support.ports import free_port, wait_for_port  # noqa: E402
from tests.support.postfix import PostfixHarness, reinjection_options  # noqa: E402

SMTP_SOURCE = shutil.which("smtp-source") or "/usr/sbin/smtp-source"


def master_cf(filter_port: int, reinject: int, plain_entry: int, plain_reinject: int,
              maxproc: int, relay_entry: int | None = None, relay_port: int = 0,
              relay_reinject: int = 0) -> list[str]:
    reinjection = reinjection_options("permit_mynetworks,reject")
    relay = [f"127.0.0.1:{relay_entry} inet n  -       n       -       -       smtpd",
             f"  -o content_filter=scan:[127.0.0.1]:{relay_port}",
             "  -o receive_override_options=no_address_mappings",
             f"127.0.0.1:{relay_reinject} inet n  -       n       -       {maxproc}      smtpd",
             *reinjection] if relay_entry else []
    return [*relay,
        f"scan      unix  -       -       n       -       {maxproc}      smtp",
        "  -o smtp_send_xforward_command=yes",
        "  -o disable_mime_output_conversion=yes",
        "  -o smtp_generic_maps=",
        f"127.0.0.1:{reinject} inet n  -       n       -       {maxproc}      smtpd",
        *reinjection,
        f"127.0.0.1:{plain_entry} inet n  -       n       -       -       smtpd",
        f"  -o content_filter=scan:[127.0.0.1]:{plain_reinject}",
        "  -o receive_override_options=no_address_mappings",
        f"127.0.0.1:{plain_reinject} inet n  -       n       -       {maxproc}      smtpd",
        *reinjection,
    ]


def _stat(pid: int | str) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int, children: bool = False) -> float:
    """User + system CPU seconds of a process so far (plus its reaped children's)."""
    fields = _stat(pid)
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def postfix_cpu(pf: PostfixHarness) -> float:
    """CPU seconds used so far by the instance: its master, live and reaped children."""
    master = int((pf.root / "spool" / "pid" / "master.pid").read_text().split()[0])
    total = 0.0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = _stat(entry)
                if int(fields[1]) == master:
                    total += cpu_seconds(int(entry), children=True)
            except (OSError, IndexError, ValueError):
                continue
    return total + cpu_seconds(master, children=True)


def peak_rss_mb(pid: int) -> float:
    """A live process's peak resident set (VmHWM) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_path(pf: PostfixHarness, port: int, messages: int, sessions: int, size: int,
             timeout: float) -> tuple[float, int, float]:
    """Send ``messages`` through the entry on ``port``; (seconds, delivered, accept s)."""
    pf.sink.reset()
    started = time.monotonic()
    subprocess.run([SMTP_SOURCE, "-s", str(sessions), "-m", str(messages), "-l", str(size),
                    "-f", "sender@harness.test", "-t", "user@sink.test",
                    "-M", "client.harness.test", f"127.0.0.1:{port}"],
                   check=True, stdout=subprocess.DEVNULL, timeout=timeout)
    accepted = time.monotonic() - started
    pf.sink.wait(messages, timeout)
    elapsed = time.monotonic() - started
    time.sleep(0.3)                             # late extra copies would show here
    return elapsed, pf.sink.count, accepted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--messages", type=int, default=1000, help="per path and round")
    parser.add_argument("--sessions", type=int, default=8, help="smtp-source sessions")
    parser.add_argument("--size", type=int, default=1024, help="message size in bytes")
    parser.add_argument("--connections", type=int, default=10,
                        help="dupfilter-smtpd next-hop connections (= scan/re-injection "
                             "maxproc)")
    parser.add_argument("--pause", type=float, default=2.0,
                        help="seconds of rest before each path (queues drain, CPUs settle)")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--reference", action="store_true",
                        help="add a loop through bench/peers/minimal_relay.py, an aiosmtpd "
                             "filter that only relays (the floor of a Python SMTP filter)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("smtpd_load: needs root (a private Postfix master)", file=sys.stderr)
        return 2

    root = Path(tempfile.mkdtemp(prefix="dupfilter-smtpd-load-"))
    root.chmod(0o755)
    filter_port, reinject, plain_entry, plain_reinject = (free_port() for _ in range(4))
    relay_entry, relay_port, relay_reinject = (free_port(), free_port(), free_port()) \
        if args.reference else (None, 0, 0)
    pf = PostfixHarness(root / "postfix", keep=False,
                        master_cf=master_cf(filter_port, reinject, plain_entry,
                                            plain_reinject, args.connections,
                                            relay_entry, relay_port, relay_reinject),
                        main_cf=["default_process_limit = 100"],
                        smtpd_options=[f"content_filter=scan:[127.0.0.1]:{filter_port}",
                                       "receive_override_options=no_address_mappings"])
    log = open(root / "dupfilter-smtpd.log", "wb")
    daemon = subprocess.Popen(
        [sys.executable, "-m", "mailfilter.smtpd", "--config", os.devnull, "--listen",
         f"127.0.0.1:{filter_port}", "--next-hop", f"127.0.0.1:{reinject}", "--db",
         str(root / "db"), "--connections", str(args.connections), "--allow-root"],
        stderr=log, stdout=subprocess.DEVNULL)
    # The filters' processes, by the loop they serve.
    daemons = {"dupfilter loop": daemon}
    if args.reference:
        daemons["minimal relay loop"] = subprocess.Popen(
            [sys.executable, str(HERE / "peers" / "minimal_relay.py"), str(relay_port),
             str(relay_reinject)], stderr=log, stdout=subprocess.DEVNULL)
    paths = {"no-filter loop": plain_entry, "dupfilter loop": 0}
    if args.reference:
        paths["minimal relay loop"] = relay_entry
    rows: list[dict[str, float]] = []
    lost = 0
    peak_mb = float("nan")
    try:
        wait_for_port("127.0.0.1", filter_port)
        if args.reference:
            wait_for_port("127.0.0.1", relay_port)
        pf.start()
        paths["dupfilter loop"] = pf.port
        for port in (plain_entry, plain_reinject, reinject, relay_entry, relay_reinject):
            if port:
                wait_for_port("127.0.0.1", port)
        for port in paths.values():             # warm-up: processes, caches, the store
            run_path(pf, port, 50, args.sessions, args.size, args.timeout)
        for number in range(1, args.rounds + 1):
            order = list(paths.items())
            shift = (number - 1) % len(order)           # each path first in turn
            order = order[shift:] + order[:shift]
            row: dict[str, float] = {"round": number}
            for name, port in order:
                time.sleep(args.pause)
                process = daemons.get(name)
                cpu = cpu_seconds(process.pid) if process else 0.0
                pf_cpu = postfix_cpu(pf)
                seconds, delivered, accepted = run_path(pf, port, args.messages,
                                                        args.sessions, args.size,
                                                        args.timeout)
                row[name + " postfix cpu"] = (postfix_cpu(pf) - pf_cpu) * 1000 / args.messages
                lost += max(0, args.messages - delivered)
                row[name] = args.messages / seconds
                row[name + " accept"] = args.messages / accepted
                row[name + " extra"] = max(0, delivered - args.messages)
                if process:
                    row[name + " cpu"] = (cpu_seconds(process.pid) - cpu) * 1000 / args.messages
            row["cpu ms/msg"] = row["dupfilter loop cpu"]
            row["ratio"] = row["dupfilter loop"] / row["no-filter loop"]
            if args.reference:
                relay = "minimal relay loop"
                row["relay ratio"] = row[relay] / row["no-filter loop"]
                row["relay cpu ratio"] = row["no-filter loop postfix cpu"] / (
                    row[relay + " postfix cpu"] + row[relay + " cpu"])
                row["relay ratio, dupfilter"] = row["dupfilter loop"] / row[relay]
            # CPU-bound estimate: the plain loop's CPU per message over the filter loop's
            # (its Postfix processes plus dupfilter-smtpd).
            row["cpu ratio"] = row["no-filter loop postfix cpu"] / (
                row["dupfilter loop postfix cpu"] + row["cpu ms/msg"])
            rows.append(row)
            print(f"round {number}: no-filter {row['no-filter loop']:.0f} msg/s, dupfilter "
                  f"{row['dupfilter loop']:.0f} msg/s, ratio {row['ratio']:.2f}"
                  + (f"; minimal relay {row['minimal relay loop']:.0f} msg/s, ratio "
                     f"{row['relay ratio']:.2f}" if args.reference else ""),
                  file=sys.stderr, flush=True)
        peak_mb = peak_rss_mb(daemon.pid)
    finally:
        for process in daemons.values():
            process.send_signal(signal.SIGTERM)
        daemon_exit = daemon.wait(60)
        relay = daemons.get("minimal relay loop")
        relay_exit = relay.wait(60) if relay else None
        pf.stop()
        log.close()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    extra = sum(int(r[name + " extra"]) for r in rows for name in paths)
    print(f"\nPostfix loop, {args.messages} messages x {args.size} B per path and round, "
          f"{args.sessions} smtp-source sessions, {args.connections} next-hop connections, "
          f"{os.cpu_count()} CPUs\n")
    print("| round | no-filter loop msg/s | dupfilter loop msg/s | ratio | "
          "Postfix CPU ms/msg (no-filter / dupfilter loop) | dupfilter-smtpd CPU ms/msg | "
          "CPU ratio |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    # Each round's row, then the medians' (every value's median over the rounds).
    medians = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
    table = [(f"{r['round']:.0f}", r) for r in rows] + [("median", medians)]
    for name, r in table:
        print(f"| {name} | {r['no-filter loop']:.0f} | {r['dupfilter loop']:.0f} | "
              f"{r['ratio']:.2f} | {r['no-filter loop postfix cpu']:.2f} / "
              f"{r['dupfilter loop postfix cpu']:.2f} | {r['cpu ms/msg']:.2f} | "
              f"{r['cpu ratio']:.2f} |")
    median = medians["ratio"]
    if args.reference:
        print("\nThe minimal relay's loop (bench/peers/minimal_relay.py):\n")
        print("| round | minimal relay loop msg/s | ratio to no-filter | Postfix CPU ms/msg | "
              "relay CPU ms/msg | CPU ratio | dupfilter loop / relay loop |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        relay_loop = "minimal relay loop"
        for name, r in table:
            print(f"| {name} | {r[relay_loop]:.0f} | {r['relay ratio']:.2f} | "
                  f"{r[relay_loop + ' postfix cpu']:.2f} | {r[relay_loop + ' cpu']:.2f} | "
                  f"{r['relay cpu ratio']:.2f} | {r['relay ratio, dupfilter']:.2f} |")
    total = args.messages * len(paths) * len(rows)
    print(f"\nlost: {lost} of {total}; extra copies: {extra}; daemon exit status "
          f"{daemon_exit}; dupfilter-smtpd peak RSS (VmHWM) {peak_mb:.0f} MB")
    verdict = "met" if median >= 0.75 and lost == 0 else "NOT met"
    print(f"target (median ratio >= 0.75, nothing lost): {verdict} — the filter costs "
          f"{(1 - median) * 100:.0f}% of the loop's throughput (by CPU per message: "
          f"{(1 - medians['cpu ratio']) * 100:.0f}%)")
    if args.reference:
        print(f"the minimal relay's loop: {medians['relay ratio']:.2f} of the no-filter "
              f"loop's rate (relay exit status {relay_exit})")
    return 0 if lost == 0 and extra == 0 and daemon_exit == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
