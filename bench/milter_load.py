"""Postfix throughput with and without dupfilter-milter, driven by smtp-source.

    python bench/milter_load.py                       # 5 rounds, 4 and 16 sessions
    python bench/milter_load.py --rounds 3 --messages 300 --nagle
    python bench/milter_load.py --rounds 3 --reference --latency 0

One private Postfix (tests/support/postfix.py) with one smtpd listener per path, so that no
reload happens between runs:

  none   smtpd with no milter
  unix   smtpd_milters = unix:...      (dupfilter-milter, its own store)
  tcp    smtpd_milters = inet:127.0.0.1:PORT  (a second dupfilter-milter, its own store)
  tcp-nagle (--nagle)  the same over TCP with --no-tcp-fixes: Nagle/delayed-ACK stalls
  minimal (--reference)  unix:... to bench/peers/minimal_milter.py, a pymilter milter that
                         only collects the message and adds a header: what any Python
                         milter costs here, so that dupfilter's own share shows
  unix[NAME], tcp[NAME] (--compare CHECKOUT)  the same two milters run from another
                         checkout (its mailfilter first on PYTHONPATH), in the same rounds

Every run sends ``--messages`` messages of ``--size`` bytes with ``smtp-source -s SESSIONS``
(one connection per message) to ``user@sink.test``, and waits until the loopback sink has all
of them: msg/s = messages / (time until the last one is delivered).  Delivered messages are
counted; any shortfall is reported as lost.  Per run, the CPU of the milter process and of
the whole machine (``/proc/stat``, every process: Postfix, the sink, the milter) are
divided by the messages: on a machine the runs keep busy, the ratio follows the machine's
CPU per message.  The order of the paths rotates each round; the
ratio column is the median of the per-round ratios to ``none`` (rounds, not runs, are
compared: the machine's load changes between rounds).
smtp-source sends the same body every time (only Message-Id differs), so after the first
message each one is a duplicate: the milter checks, tags and records every message.
With ``--latency N`` (default 25) each round also times N messages sent one at a time per
path (smtplib, one connection each): that is where the TCP stalls show.
"""

from __future__ import annotations

import argparse
import os
import shutil
import smtplib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))     # the repository's root: tests.support
from tests.support.daemons import MilterDaemon  # noqa: E402
from tests.support.ports import free_port  # noqa: E402
from tests.support.postfix import PostfixHarness  # noqa: E402

SMTP_SOURCE = shutil.which("smtp-source") or "/usr/sbin/smtp-source"


def smtpd_service(port: int, milters: str) -> list[str]:
    """A master.cf smtpd listener on ``port`` with its own smtpd_milters."""
    return [f"127.0.0.1:{port} inet  n       -       n       -       -       smtpd",
            f"  -o smtpd_milters={milters}"]


def machine_jiffies() -> tuple[int, int]:
    """(all, idle + iowait) clock ticks of every CPU so far, from ``/proc/stat``."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(values), values[3] + values[4]


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of one process so far (0 without a process)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    """A live process's peak resident set (VmHWM) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_ratio(cpu_ms: dict[tuple[int, str], list[float]], sessions: int, path: str) -> float:
    """Median over rounds of a milter's CPU per message over the minimal milter's."""
    return statistics.median(a / b for a, b in zip(cpu_ms[(sessions, path)],
                                                   cpu_ms[(sessions, "minimal")], strict=True)
                             if b > 0) if any(cpu_ms[(sessions, "minimal")]) else float("nan")


def run_once(pf: PostfixHarness, port: int, sessions: int, messages: int, size: int,
             timeout: float) -> tuple[float, float, int]:
    """One smtp-source run; returns (accept msg/s, delivered msg/s, delivered count)."""
    before = pf.sink.count
    started = time.perf_counter()
    subprocess.run([SMTP_SOURCE, "-s", str(sessions), "-m", str(messages), "-l", str(size),
                    "-f", "sender@harness.test", "-t", "user@sink.test",
                    "-M", "client.harness.test", f"127.0.0.1:{port}"],
                   check=True, capture_output=True, timeout=timeout)
    accepted = time.perf_counter() - started
    pf.sink.wait(before + messages, timeout)
    delivered_at = time.perf_counter() - started
    got = pf.sink.count - before
    return messages / accepted, got / delivered_at, got


def latency_ms(pf: PostfixHarness, port: int, count: int) -> float:
    """Median milliseconds for one message at a time (one SMTP connection each)."""
    raw = (b"From: sender@harness.test\r\nSubject: latency\r\n\r\n"
           + b"".join(b"%d" % (i % 10) * 70 + b"\r\n" for i in range(14)))
    times = []
    for _ in range(count):
        started = time.perf_counter()
        with smtplib.SMTP("127.0.0.1", port, timeout=60) as client:
            client.sendmail("sender@harness.test", ["user@sink.test"], raw)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--messages", type=int, default=400, help="per run (default 400)")
    parser.add_argument("--size", type=int, default=1024, help="message size in bytes")
    parser.add_argument("--sessions", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--nagle", action="store_true",
                        help="add a TCP milter run with --no-tcp-fixes (slow: ~90 ms a message)")
    parser.add_argument("--reference", action="store_true",
                        help="add a minimal pymilter milter (bench/peers/minimal_milter.py) "
                             "on a unix socket")
    parser.add_argument("--compare", type=Path, metavar="CHECKOUT",
                        help="also run another checkout's dupfilter-milter (unix and TCP) in "
                             "the same rounds, e.g. a commit unpacked with git archive")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--latency", type=int, default=25, metavar="N",
                        help="also time N single messages per path, one at a time "
                             "(0: skip)")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="milter-load-"))
    os.chmod(work, 0o755)
    sock = work / "pf" / "milter" / "milter.sock"
    tcp_port, nagle_port = free_port(), free_port()
    ports = {"none": free_port(), "unix": free_port(), "tcp": free_port()}
    master = (smtpd_service(ports["none"], "") + smtpd_service(ports["unix"], f"unix:{sock}")
              + smtpd_service(ports["tcp"], f"inet:127.0.0.1:{tcp_port}"))
    if args.nagle:
        ports["tcp-nagle"] = free_port()
        master += smtpd_service(ports["tcp-nagle"], f"inet:127.0.0.1:{nagle_port}")
    reference_sock = work / "pf" / "milter" / "minimal.sock"
    if args.reference:
        ports["minimal"] = free_port()
        master += smtpd_service(ports["minimal"], f"unix:{reference_sock}")
    other = f"[{args.compare.name}]" if args.compare else ""
    other_sock = work / "pf" / "milter" / "other.sock"
    other_tcp = free_port()
    if args.compare:
        ports["unix" + other], ports["tcp" + other] = free_port(), free_port()
        master += (smtpd_service(ports["unix" + other], f"unix:{other_sock}")
                   + smtpd_service(ports["tcp" + other], f"inet:127.0.0.1:{other_tcp}"))
    pf = PostfixHarness(work / "pf", master_cf=master, keep=False,
                        main_cf=["milter_default_action = tempfail"])
    (work / "pf" / "milter").mkdir(parents=True)
    daemons = [MilterDaemon(work / "m-unix", "", socket_path=sock)]
    tcp = MilterDaemon(work / "m-tcp", "", kind="inet")
    tcp.port, tcp.spec, tcp.address = tcp_port, f"inet:{tcp_port}@127.0.0.1", ("127.0.0.1",
                                                                                  tcp_port)
    daemons.append(tcp)
    if args.nagle:
        slow = MilterDaemon(work / "m-nagle", "", kind="inet",
                            args=("--allow-root", "--no-tcp-fixes"))
        slow.port, slow.spec = nagle_port, f"inet:{nagle_port}@127.0.0.1"
        slow.address = ("127.0.0.1", nagle_port)
        daemons.append(slow)
    milter_of = {"none": None, "unix": daemons[0], "tcp": daemons[1]}
    if args.nagle:
        milter_of["tcp-nagle"] = daemons[2]
    if args.compare:
        env = {"PYTHONPATH": str(args.compare.resolve())}
        milter_of["unix" + other] = MilterDaemon(work / "o-unix", "", socket_path=other_sock,
                                                 env=env)
        tcp_other = MilterDaemon(work / "o-tcp", "", kind="inet", env=env)
        tcp_other.port, tcp_other.spec = other_tcp, f"inet:{other_tcp}@127.0.0.1"
        tcp_other.address = ("127.0.0.1", other_tcp)
        milter_of["tcp" + other] = tcp_other
        daemons += [milter_of["unix" + other], tcp_other]
    paths = list(ports)
    peak_mb: dict[str, float] = {}
    reference: subprocess.Popen[bytes] | None = None
    cpu_ms: dict[tuple[int, str], list[float]] = {}
    machine_ms: dict[tuple[int, str], list[float]] = {}
    busy: dict[tuple[int, str], list[float]] = {}
    results: dict[tuple[int, str], list[tuple[float, float, int]]] = {}
    latencies: dict[str, list[float]] = {}
    lost = 0
    try:
        pf.start()
        for d in daemons:
            d.start()
        if args.reference:
            reference = subprocess.Popen([sys.executable, str(HERE / "peers" / "minimal_milter.py"),
                                          f"unix:{reference_sock}"])
            deadline = time.monotonic() + 30
            while not reference_sock.exists():
                if reference.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the minimal milter did not start")
                time.sleep(0.05)
            os.chmod(reference_sock, 0o666)    # Postfix's smtpd runs as postfix
        # Warm-up: Postfix processes, milter stores, sink.
        for path in paths:
            run_once(pf, ports[path], 4, 20, args.size, args.timeout)
        for round_no in range(args.rounds):
            for sessions in args.sessions:
                order = paths[round_no % len(paths):] + paths[:round_no % len(paths)]
                for path in order:
                    count = args.messages if path != "tcp-nagle" else max(
                        40, args.messages // 4)
                    milter = milter_of.get(path)
                    pid = (milter.proc.pid if milter is not None else
                           reference.pid if path == "minimal" and reference else None)
                    cpu_before = cpu_seconds(pid)
                    ticks_before, idle_before = machine_jiffies()
                    result = run_once(pf, ports[path], sessions, count, args.size,
                                      args.timeout)
                    ticks, idle = machine_jiffies()
                    used = (ticks - ticks_before) - (idle - idle_before)
                    cpu_ms.setdefault((sessions, path), []).append(
                        (cpu_seconds(pid) - cpu_before) * 1000 / count)
                    machine_ms.setdefault((sessions, path), []).append(
                        used / os.sysconf("SC_CLK_TCK") * 1000 / count)
                    busy.setdefault((sessions, path), []).append(
                        used / max(1, ticks - ticks_before))
                    results.setdefault((sessions, path), []).append(result)
                    lost += count - result[2]
                    print(f"round {round_no + 1} s={sessions:<2} {path:<9} "
                          f"accept {result[0]:6.1f}/s  delivered {result[1]:6.1f}/s  "
                          f"{result[2]}/{count}", file=sys.stderr, flush=True)
            if args.latency:
                before = pf.sink.count
                for path in paths:
                    latencies.setdefault(path, []).append(
                        latency_ms(pf, ports[path], args.latency))
                # Let these arrive before the next run counts its own.
                pf.sink.wait(before + args.latency * len(paths), args.timeout)
        for path, milter in milter_of.items():
            if milter is not None and milter.proc is not None:
                peak_mb[path] = peak_rss_mb(milter.proc.pid)
        if reference is not None:
            peak_mb["minimal"] = peak_rss_mb(reference.pid)
    finally:
        for d in daemons:
            d.kill()
        if reference is not None:
            reference.kill()
            reference.wait()
        pf.stop()
    milter_lines = sum(len(d.verdict_lines()) for d in daemons)
    errors = sum(1 for d in daemons for line in d.verdict_lines() if "error" in line)

    print(f"\nPostfix + dupfilter-milter, smtp-source {args.messages} x {args.size} B "
          f"per run, {args.rounds} rounds (medians), {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| sessions | path | accepted msg/s | delivered msg/s | ratio to none "
          "| per-round ratios | milter CPU ms/msg | machine CPU ms/msg | CPUs busy "
          "| delivered |" + (" milter CPU / minimal's | delivered / minimal's |"
                               if args.reference else ""))
    print("|---:|---|---:|---:|---:|---|---:|---:|---:|---:|" + ("---:|---:|" if args.reference
                                                               else ""))
    for sessions in args.sessions:
        base = results[(sessions, "none")]
        for path in paths:
            runs = results[(sessions, path)]
            ratios = [run[1] / ref[1] for run, ref in zip(runs, base, strict=True)]
            sent = (args.messages if path != "tcp-nagle" else max(40, args.messages // 4))
            print(f"| {sessions} | {path} | {statistics.median(r[0] for r in runs):.1f} "
                  f"| {statistics.median(r[1] for r in runs):.1f} "
                  f"| {statistics.median(ratios):.2f} "
                  f"| {' '.join(f'{r:.2f}' for r in ratios)} "
                  f"| {statistics.median(cpu_ms[(sessions, path)]):.2f} "
                  f"| {statistics.median(machine_ms[(sessions, path)]):.2f} "
                  f"| {statistics.median(busy[(sessions, path)]):.0%} "
                  f"| {sum(r[2] for r in runs)}/{sent * len(runs)} |"
                  + (f" {cpu_ratio(cpu_ms, sessions, path):.2f} | " + "{:.2f} |".format(
                      statistics.median(run[1] / ref[1] for run, ref in zip(
                          runs, results[(sessions, "minimal")], strict=True)))
                     if args.reference else ""))
    if latencies:
        print(f"\nOne message at a time ({args.latency} per path per round, median of the "
              "rounds' medians):\n")
        print("| path | ms per message |")
        print("|---|---:|")
        for path in paths:
            print(f"| {path} | {statistics.median(latencies[path]):.1f} |")
    if peak_mb:
        print("\nPeak RSS (VmHWM) of each milter process: " + ", ".join(
            f"{path} {mb:.0f} MB" for path, mb in peak_mb.items()))
    print(f"\nlost: {lost}; milter log lines: {milter_lines}; milter errors: {errors}")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
