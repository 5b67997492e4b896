#!/usr/bin/env python3
"""`scripts/gpu-check run OUTDIR [--quick]` inside a bundle (see scripts/gpu-check):
runs every step of the GPU check with its own time limit, the whole within
eight minutes, and writes OUTDIR/report.md and OUTDIR/report.json (also when
a step fails). Exits 1 when a step failed, 2 on bad input.

    python3 scripts/gpu-check.d/run.py --bundle DIR OUTDIR [--quick] [--only WORD]

Steps: the device suites with GEEPS_REQUIRE_CUDA=1, the C ABI's CUDA test,
caffe-geeps LeNet on GPU 0 against the CPU run, two worker processes on the
one GPU, compute-sanitizer memcheck and racecheck (NOT RUN where missing or
refused), and figures: row gather / scatter-add against a device-to-device
copy, the stall bench on the GPU, caffe-geeps against PyTorch's LeNet, and
(last, in the time left; NOT RUN without root or where namespaces are
refused; one run each way with --quick, three otherwise) geeps-bench sync across 4 namespace hosts on 10
Gb/s links, f32 against gloo with the send window and without.
Needs python3 only (and the NVIDIA driver; nvidia-smi, compute-sanitizer and
PyTorch when present). LD_LIBRARY_PATH is kept as it is (the emulated driver
is found through it).
"""

import argparse
import atexit
import csv
import datetime
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TOTAL_S = 470  # the whole run, under the 8 minutes (480 s) of the issue
TAIL_LINES = 40


class Runner:
    def __init__(self, bundle, out, quick, only, emulated):
        self.bundle = bundle
        self.out = out
        self.logs = out / "logs"
        self.quick = quick
        self.only = only
        self.emulated = emulated
        self.start = time.monotonic()
        self.steps = []

    def left(self):
        return TOTAL_S - (time.monotonic() - self.start)

    def wanted(self, name):
        return self.only is None or self.only in name

    def record(self, name, group, status, seconds, note="", figures=None, tail="", required=True, log=None):
        step = {"name": name, "group": group, "status": status, "seconds": round(seconds, 1),
                "required": required, "note": note, "figures": figures or {}}
        if log:
            step["log"] = str(log.relative_to(self.out))
        if status == "failed" and tail:
            step["tail"] = tail
        self.steps.append(step)
        mark = {"passed": "PASSED ", "failed": "FAILED ", "not run": "NOT RUN"}[status]
        print(f"  {mark} {name} ({seconds:.1f} s){': ' + note if note else ''}", flush=True)
        if status == "failed" and tail:
            print("    " + tail.replace("\n", "\n    "), flush=True)
        return step

    def exec(self, name, cmd, budget, cwd=None, env=None):
        """Runs cmd with at most `budget` seconds (less if the run's time is nearly up).
        Returns (rc or None on a timeout, seconds, output, log path)."""
        limit = min(budget, self.left() - 5)
        log = self.logs / (re.sub(r"[^A-Za-z0-9_.-]+", "_", name) + ".log")
        if limit < 3:
            log.write_text("not started: the check's 8 minutes are used up\n")
            return "no time", 0.0, "", log
        full_env = dict(os.environ)
        full_env.update(env or {})
        t = time.monotonic()
        with open(log, "wb") as f:
            f.write(("$ " + " ".join(str(c) for c in cmd) + f"   (limit {limit:.0f} s)\n").encode())
            f.flush()
            try:
                p = subprocess.Popen([str(c) for c in cmd], cwd=cwd, env=full_env, stdout=f,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            except OSError as e:
                f.write(f"could not start: {e}\n".encode())
                return 127, time.monotonic() - t, f"could not start: {e}", log
            try:
                rc = p.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                kill(p)
                rc = None
                f.write(f"\n[gpu-check] killed after {limit:.0f} s (the step's limit)\n".encode())
        secs = time.monotonic() - t
        return rc, secs, log.read_text(errors="replace"), log

    def step(self, name, group, cmd, budget, check=None, cwd=None, env=None, required=True):
        """Runs a command as one step; `check(output)` returns (ok, note, figures)."""
        if not self.wanted(name):
            return None
        print(f"==> {name}", flush=True)
        rc, secs, output, log = self.exec(name, cmd, budget, cwd, env)
        if rc == "no time":
            return self.record(name, group, "failed" if required else "not run", 0.0,
                               "not started: the check's time is used up", required=required, log=log)
        if rc is None:
            # An optional step (sanitizer, PyTorch) cut short proves nothing either way: NOT RUN.
            return self.record(name, group, "failed" if required else "not run", secs,
                               f"timed out after {secs:.0f} s (limit {budget} s)",
                               tail=tail(output), required=required, log=log)
        ok, note, figures = (rc == 0, "", {}) if check is None else check(rc, output)
        if rc != 0 and ok is True:
            ok = False
        if ok is None:
            return self.record(name, group, "not run", secs, note, figures, required=required, log=log)
        if not ok and not note:
            note = f"exit status {rc}"
        return self.record(name, group, "passed" if ok else "failed", secs, note, figures,
                           tail="" if ok else tail(output), required=required, log=log)


def kill(p):
    try:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    except ProcessLookupError:
        pass


def tail(text, n=TAIL_LINES):
    return "\n".join(text.rstrip().splitlines()[-n:])


def is_bundle_at(path, bundle):
    return os.path.isfile(os.path.join(path, "gpu-check.json")) and os.path.samefile(path, bundle)


def place(bundle, manifest, out):
    """Puts the bundle where its binaries' compiled-in paths point (build_root,
    build_target): a symbolic link where the path does not exist, otherwise a
    bind mount in a private mount namespace (this process re-executed under
    unshare). Returns (bundle path to use, out path to use, how)."""
    spots = [(manifest["build_root"], bundle)]
    if manifest.get("build_target"):
        spots.append((manifest["build_target"], bundle / "target"))
    if os.environ.get("GEEPS_GPU_CHECK_NS") == "1":
        return mount_inside(spots, bundle, out)
    made, busy = [], []
    for path, to in spots:
        if os.path.lexists(path) and os.path.exists(path) and os.path.samefile(path, to):
            continue
        if os.path.islink(path) and (not os.path.exists(path) or os.path.isfile(os.path.join(path, "gpu-check.json"))):
            os.unlink(path)  # a link a run before this one left behind
        if not os.path.lexists(path):
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                os.symlink(to, path)
                made.append(path)
                continue
            except OSError as e:
                busy.append(f"{path} (cannot make a link there: {e})")
                continue
        busy.append(path)
    if made:
        atexit.register(lambda: [os.unlink(p) for p in made if os.path.islink(p)])
    if not busy:
        how = "link " + ", ".join(made) if made else "already in place"
        return bundle, out, how
    for p in made:
        os.unlink(p)
    # The paths exist (a checkout, say): a private mount namespace, so nothing
    # outside this run sees the bundle there.
    unshare = shutil.which("unshare")
    if not unshare:
        sys.exit(f"gpu-check run: the binaries look for their files under {', '.join(busy)}, which exist(s), "
                 "and unshare (util-linux) is missing to mount the bundle there privately")
    cmd = [unshare, "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        cmd[1:1] = ["--user", "--map-root-user"]
    env = dict(os.environ, GEEPS_GPU_CHECK_NS="1")
    sys.stdout.flush()
    r = subprocess.run(cmd + [sys.executable, *sys.argv], env=env)
    if r.returncode == 3:
        sys.exit(f"gpu-check run: {', '.join(busy)} exist(s) and the private mount namespace failed (see above): "
                 "run where that path is free, or as root")
    sys.exit(r.returncode)


def mount_inside(spots, bundle, out):
    def mount(src, dst):
        r = subprocess.run(["mount", "--bind", str(src), str(dst)], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"gpu-check run: mount --bind {src} {dst}: {r.stderr.strip()}", file=sys.stderr)
            sys.exit(3)
    hidden = [p for p, _ in spots]

    def under(p):
        return any(os.path.commonpath([os.path.abspath(p), h]) == h for h in hidden)
    stash = pathlib.Path(tempfile.mkdtemp(prefix="gpu-check-"))

    def clean():
        # OUTDIR's mount first, so that nothing below removes the report.
        if (stash / "out").is_dir():
            subprocess.run(["umount", str(stash / "out")], capture_output=True)
            try:
                (stash / "out").rmdir()
            except OSError:
                return
        shutil.rmtree(stash, ignore_errors=True)
    atexit.register(clean)
    # OUTDIR under a covered path: reach it through a bind mount made first.
    if under(out):
        (stash / "out").mkdir()
        mount(out, stash / "out")
        out = stash / "out"
    # Libraries found through LD_LIBRARY_PATH under a covered path (the
    # emulated driver under target/): copies, links resolved.
    ld = os.environ.get("LD_LIBRARY_PATH", "")
    if ld:
        entries = []
        for i, e in enumerate(ld.split(":")):
            if e and under(e) and os.path.isdir(e):
                copy = stash / f"ld{i}"
                copy.mkdir()
                # One copy of each real file, links to it under the other
                # names: the emulated driver is libcuda and libcublas at once.
                for f in os.listdir(e):
                    src = os.path.realpath(os.path.join(e, f))
                    if os.path.isfile(src):
                        real = stash / "real" / src.lstrip("/").replace("/", "%")
                        if not real.exists():
                            real.parent.mkdir(exist_ok=True)
                            shutil.copy2(src, real)
                        os.symlink(real, copy / f)
                e = str(copy)
            entries.append(e)
        os.environ["LD_LIBRARY_PATH"] = ":".join(entries)
    for path, to in spots:
        mount(to, path)
    return pathlib.Path(spots[0][0]), out, f"bind mount over {', '.join(hidden)} (private mount namespace)"


def test_counts(rc, output):
    passed = sum(int(m) for m in re.findall(r"^test result: \w+\. (\d+) passed", output, re.M))
    failed = sum(int(m) for m in re.findall(r"^test result: \w+\. \d+ passed; (\d+) failed", output, re.M))
    ignored = sum(int(m) for m in re.findall(r"; (\d+) ignored", output))
    # A suite with its own harness (geeps-launch's processes): "N passed, N failed".
    for p, f in re.findall(r"^(\d+) passed, (\d+) failed$", output, re.M):
        passed, failed = passed + int(p), failed + int(f)
    figures = {"tests passed": passed, "failed": failed, "ignored": ignored}
    if rc == 0 and passed == 0:
        return False, "no test ran", figures
    skipped = re.findall(r"^.*CUDA variant skipped.*$", output, re.M)
    if skipped:
        return False, f"a CUDA variant skipped: {skipped[0]}", figures
    note = f"{passed} passed, {failed} failed, {ignored} ignored"
    # A test that needs what this machine lacks (a second GPU) says so on a
    # line of its own; the report carries it rather than hiding it in a pass.
    not_run = re.findall(r"^(\S+): NOT RUN: (.*)$", output, re.M)
    if not_run:
        figures["not run"] = [f"{t}: {why}" for t, why in not_run]
        note += "; NOT RUN: " + "; ".join(f"{t} ({why})" for t, why in not_run)
    return rc == 0 and failed == 0, note, figures


# LeNet on the GPU against the CPU (see gpu_check in main).
TRAIN_LOSS_TOLERANCE = 0.05
TEST_LOSS_TOLERANCE = 0.02


def read_curve(path):
    """{iteration: loss} of the displayed iterations, the last test accuracy and {iteration: test loss}."""
    losses, acc, test_losses = {}, None, {}
    with open(path) as f:
        for row in csv.DictReader(f):
            if row.get("loss"):
                losses[int(row["iteration"])] = float(row["loss"])
            if row.get("test_accuracy"):
                acc = float(row["test_accuracy"])
            if row.get("test_loss"):
                test_losses[int(row["iteration"])] = float(row["test_loss"])
    return losses, acc, test_losses


def throughput(output):
    m = re.search(r"throughput: (\d+) images/s", output)
    return int(m.group(1)) if m else None


def stall(output):
    m = re.search(r"geeps stall fraction per worker \[([^\]]*)\]", output)
    return m.group(1) if m else None


def main():
    ap = argparse.ArgumentParser(description="the GPU check's runner (see scripts/gpu-check)")
    ap.add_argument("--bundle", required=True)
    ap.add_argument("outdir")
    ap.add_argument("--quick", action="store_true",
                    help="LeNet 100 iterations, small bench sizes (the emulated CI run); a real GPU uses 500")
    ap.add_argument("--only", help="run only the steps whose name contains this (diagnosis)")
    a = ap.parse_args()

    bundle = pathlib.Path(a.bundle).resolve()
    mf = bundle / "gpu-check.json"
    if not mf.is_file():
        sys.exit(f"gpu-check run: {bundle} is not a bundle (no gpu-check.json)")
    manifest = json.loads(mf.read_text())
    out = pathlib.Path(a.outdir).resolve()
    if out.exists() and not out.is_dir():
        sys.exit(f"gpu-check run: {out} exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "logs").mkdir(exist_ok=True)
        (out / "work").mkdir(exist_ok=True)
    except OSError as e:
        sys.exit(f"gpu-check run: cannot write OUTDIR {out}: {e}")
    bundle, out, how = place(bundle, manifest, out)
    print(f"==> the bundle at its compiled-in paths: {how}", flush=True)

    emulated = os.environ.get("GEEPS_CUDA_EMU") == "1"
    r = Runner(bundle, out, a.quick, a.only, emulated)
    started = datetime.datetime.now().astimezone()
    iters = 100 if a.quick else 500
    bins = {k: bundle / v for k, v in manifest["bins"].items()}
    caffe = bins["caffe-geeps"]
    solver = bundle / "examples/caffe/models/lenet_solver.prototxt"
    work = out / "work"
    base_env = {"GEEPS_REQUIRE_CUDA": "1"}
    if emulated:
        # Native row kernels (the interpreter is .ci/cuda.sh's business) and a
        # device small enough that the row bench's sizes stay quick.
        base_env["GEEPS_CUDA_EMU_KERNELS"] = os.environ.get("GEEPS_CUDA_EMU_KERNELS", "native")

    # --- the device ------------------------------------------------------
    device = {"nvidia-smi": None, "emulated": emulated}
    print("==> device", flush=True)
    smi = shutil.which("nvidia-smi")
    if smi:
        q = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total,compute_cap",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
        line = (q.stdout.strip().splitlines() or [q.stderr.strip() or "no output"])[0]
        device["nvidia-smi"] = line
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and q.returncode == 0:
            device["name"], device["driver"] = parts[0], parts[1]
        print(f"  nvidia-smi: {line}")
    else:
        print("  nvidia-smi: not found" + (" (GEEPS_CUDA_EMU=1: the emulated driver)" if emulated else ""))
    if emulated:
        device.setdefault("name", "cuda-emu (emulated driver)")
        print("  EMULATED DRIVER: every step is functional only; timings and figures are NOT meaningful")
    q = subprocess.run([caffe, "device_query", "-gpu", "0"], capture_output=True, text=True, timeout=60)
    device["device_query"] = (q.stdout + q.stderr).strip()
    print("  " + device["device_query"].replace("\n", "\n  "), flush=True)
    m = re.search(r"Visible devices:\s*(\d+)", device["device_query"])
    gpus = max(1, int(m.group(1))) if m else 1
    device["visible GPUs"] = gpus

    # --- the device suites -------------------------------------------------
    budget_suite = 90 if emulated else 60
    for s in manifest["suites"]:
        if emulated and s.get("real_gpu_only") and r.wanted(f"suite {s['name']}"):
            r.record(f"suite {s['name']}", "left to .ci/cuda.sh", "not run", 0.0,
                     "on the emulated driver .ci/cuda.sh runs this suite", required=False)
            continue
        env = dict(base_env)
        env.update(s["env"])
        r.step(f"suite {s['name']}", "device suites", [bundle / s["exe"], *s["args"]], budget_suite,
               check=test_counts, cwd=bundle / s["cwd"], env=env)
    r.step("C ABI CUDA test (geeps-ffi/ctest/cuda.c)", "device suites", [bundle / manifest["ffi_cuda"]], 30,
           check=lambda rc, o: (rc == 0 and re.search(r" 0 failed", o) is not None,
                                (re.findall(r"\d+ passed, \d+ failed", o) or [""])[-1], {}),
           cwd=work, env=base_env)

    # --- LeNet: GPU against the CPU, two workers on one GPU ------------------
    def train(tag, extra, launch=0):
        # Every run starts afresh over the last one's snapshots (the same snapshot_prefix).
        cmd = [caffe, "train", "--solver", solver, "--overwrite", "--max-iter", str(iters), "--no-progress",
               "--curve", work / tag, *extra]
        if launch:
            cmd = [bins["geeps-launch"], "-n", str(launch), "--", *cmd]
        else:
            cmd += ["--workers", "1"]
        return cmd

    cpu_curve = {}

    def cpu_check(rc, output):
        if rc != 0:
            return False, "", {}
        cpu_curve["losses"], cpu_curve["acc"], cpu_curve["test"] = read_curve(work / "cpu_curve.csv")
        cpu_curve["ips"] = throughput(output)
        return True, f"test accuracy {cpu_curve['acc']}", {"images/s": cpu_curve["ips"],
                                                            "test accuracy": cpu_curve["acc"]}

    r.step(f"LeNet {iters} iterations on the CPU (the reference)", "lenet", train("cpu", []), 120,
           check=cpu_check, cwd=work, env={"GEEPS_REQUIRE_CUDA": "1"})

    gpu_figs = {}

    def gpu_check(rc, output):
        if rc != 0:
            return False, "", {}
        if "losses" not in cpu_curve:
            return False, "no CPU run to compare with", {}
        losses, acc, test_losses = read_curve(work / "gpu_curve.csv")
        gpu_figs.update({"images/s": throughput(output), "stall": stall(output), "test accuracy": acc})
        # A GPU computes in another order than the CPU (fused multiply-adds,
        # its own exp and division): the two SGD trajectories agree to float
        # noise for the first tens of iterations and then drift apart as
        # chaotic systems do, so a minibatch's loss is held to 5% and the
        # test loss, an average over the whole test set, to 2%.
        worst, worst_test = 0.0, 0.0
        bad = []
        for it, ref in sorted(cpu_curve["losses"].items()):
            if it not in losses:
                bad.append(f"iteration {it} not displayed")
                continue
            d = abs(losses[it] - ref) / abs(ref)
            worst = max(worst, d)
            if d > TRAIN_LOSS_TOLERANCE:
                bad.append(f"iteration {it}: loss {losses[it]:.6g} vs CPU {ref:.6g}")
        for it, ref in sorted(cpu_curve["test"].items()):
            if it not in test_losses:
                bad.append(f"iteration {it}: no test loss")
                continue
            d = abs(test_losses[it] - ref) / abs(ref)
            worst_test = max(worst_test, d)
            if d > TEST_LOSS_TOLERANCE:
                bad.append(f"iteration {it}: test loss {test_losses[it]:.6g} vs CPU {ref:.6g}")
        dacc = abs(acc - cpu_curve["acc"]) if acc is not None and cpu_curve["acc"] is not None else None
        if dacc is None or dacc > 0.02:
            bad.append(f"test accuracy {acc} vs CPU {cpu_curve['acc']}")
        figs = {"loss max rel diff": round(worst, 5), "test loss max rel diff": round(worst_test, 5),
                "test accuracy": acc, "CPU test accuracy": cpu_curve["acc"],
                "displayed iterations": len(cpu_curve["losses"]), "images/s": gpu_figs["images/s"],
                "stall": gpu_figs["stall"]}
        if bad:
            return False, "; ".join(bad[:5]), figs
        return True, f"losses within {worst:.2%} of the CPU's at {len(cpu_curve['losses'])} displayed iterations " \
                     f"(limit {TRAIN_LOSS_TOLERANCE:.0%}), test losses within {worst_test:.2%} " \
                     f"(limit {TEST_LOSS_TOLERANCE:.0%}), accuracy {acc} vs {cpu_curve['acc']}", figs

    r.step(f"LeNet {iters} iterations on GPU 0 against the CPU", "lenet", train("gpu", ["--gpu", "0"]), 120,
           check=gpu_check, cwd=work, env=base_env)

    def two_check(rc, output):
        if rc != 0:
            return False, "", {}
        losses, acc, _ = read_curve(work / "two_curve.csv")
        ranks = len(set(re.findall(r"^\[(\d+)\]", output, re.M)))
        if not losses or ranks < 2:
            return False, f"{ranks} rank(s) printed, {len(losses)} losses displayed", {}
        first, last = losses[min(losses)], losses[max(losses)]
        figs = {"first loss": first, "last loss": last, "test accuracy": acc, "images/s": throughput(output)}
        ok = last < 0.7 * first
        return ok, f"2 processes on GPU 0: loss {first:.4g} -> {last:.4g}, test accuracy {acc}", figs

    r.step(f"LeNet {iters} iterations, 2 worker processes sharing GPU 0 (geeps-launch -n 2)", "lenet",
           train("two", ["--gpu", "0"], launch=2), 120, check=two_check, cwd=work, env=base_env)

    # --- figures ----------------------------------------------------------------
    note_emu = " (emulated driver: functional only, timings NOT meaningful)" if emulated else ""

    def rows_check(rc, output):
        if re.search(r"^skipped: no CUDA device", output, re.M):
            return False, "the bench found no CUDA device", {}
        figs = {}
        for m in re.finditer(r"^\s*(\d+)\s+(\d+) MiB\s+([\d.]+) GB/s\s+([\d.]+)×\s+([\d.]+)×\s+([\d.]+)×", output, re.M):
            rows, mib, d2d, gather, assign, add = m.groups()
            d2d = float(d2d)
            figs[f"{rows} rows x 128 floats ({mib} MiB)"] = {
                "d2d copy GB/s": d2d, "gather GB/s": round(d2d * float(gather), 1),
                "gather / copy": float(gather), "scatter-assign / copy": float(assign),
                "scatter-add GB/s": round(d2d * float(add), 1), "scatter-add / copy": float(add)}
        if not figs:
            return False, "no figures in the bench's output", {}
        biggest = list(figs.values())[-1]
        return True, f"largest size: gather {biggest['gather / copy']}x, scatter-add {biggest['scatter-add / copy']}x " \
                     f"of a device-to-device copy ({biggest['d2d copy GB/s']} GB/s){note_emu}", figs

    bench_env = dict(base_env)
    if emulated:
        bench_env["GEEPS_CUDA_EMU_MEMORY"] = "400M"  # the two small sizes only
    r.step("figures: row gather / scatter-add against a device-to-device copy (gpu_kernels bench)", "figures",
           [bundle / manifest["bench_rows"]], 90, check=rows_check, cwd=bundle / "geeps-cuda", env=bench_env)

    def stall_check(rc, output):
        if rc != 0:
            return False, "", {}
        res = work / "stall" / "stall.json"
        figs = {}
        lines = [ln for ln in output.splitlines() if "stall" in ln.lower() and "%" in ln]
        if res.is_file():
            try:
                figs["stall.json"] = json.loads(res.read_text())
            except ValueError:
                pass
        return True, (lines[-1].strip() if lines else "stall bench done") + note_emu + " (paper: GeePS < 8%)", \
            {"lines": lines[-8:], **figs}

    # One worker per GPU, as in the paper: worker processes sharing a GPU are
    # time-sliced by it (no MPS here), and the stall measured then is the
    # sharing's (docs/gpu.md).
    r.step(f"figures: stall bench with GPU compute, one worker per GPU "
           f"(geeps-bench stall --device cuda --quick --workers {gpus})", "figures",
           [bins["geeps-bench"], "stall", "--device", "cuda", "--quick", "--workers", str(gpus),
            "--out", work / "stall"], 150,
           check=stall_check, cwd=work, env=base_env)

    def torch_check(rc, output):
        m = re.search(r"^pytorch: ([\d.]+) images/s.*$", output, re.M)
        if not m:
            line = (output.strip().splitlines() or ["no output"])[-1]
            return None, f"PyTorch not available: {line}", {}
        torch = float(m.group(1))
        ours = gpu_figs.get("images/s")
        figs = {"pytorch images/s": torch, "caffe-geeps images/s": ours}
        if ours:
            figs["caffe-geeps / pytorch"] = round(ours / torch, 3)
        return True, f"caffe-geeps {ours} images/s, PyTorch {torch:.0f} images/s{note_emu}", figs

    torch_dev = "cuda:0"
    r.step(f"figures: LeNet images/s, caffe-geeps against PyTorch ({iters} iterations)", "figures",
           [sys.executable, bundle / "scripts/gpu-bench/pytorch_lenet.py", "--device", torch_dev,
            "--iterations", str(iters)], 90, check=torch_check, cwd=work, required=False)

    # --- compute-sanitizer ----------------------------------------------------
    cs = shutil.which("compute-sanitizer")
    kernels_suite = next((s for s in manifest["suites"] if s["name"] == "device_contract"), None)
    # racecheck tracks every shared-memory access: on an H200 one LeNet
    # iteration under it takes about 25 s, against 0.15 s under memcheck.
    for tool, lenet_iters, limit in [("memcheck", 20, 60), ("racecheck", 1, 120)]:
        targets = [
            (f"compute-sanitizer {tool}: LeNet {lenet_iters} iteration{'s' if lenet_iters > 1 else ''} on GPU 0",
             [caffe, "train", "--solver", solver, "--overwrite", "--max-iter", str(lenet_iters), "--no-progress",
              "--workers", "1",
              "--gpu", "0", "--curve", work / f"san_{tool}"], work, {}),
            (f"compute-sanitizer {tool}: the row-kernel suite (device_contract)",
             [bundle / kernels_suite["exe"], "--test-threads=1"], bundle / kernels_suite["cwd"], {}),
        ]
        for name, cmd, cwd, env in targets:
            if not r.wanted(name):
                continue
            if not cs:
                print(f"==> {name}", flush=True)
                r.record(name, "sanitizer", "not run", 0.0, "compute-sanitizer not available (not on PATH)",
                         required=False)
                continue
            if emulated:
                print(f"==> {name}", flush=True)
                r.record(name, "sanitizer", "not run", 0.0,
                         "compute-sanitizer not available under the emulated driver", required=False)
                continue

            def san_check(rc, output):
                # memcheck: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK
                # SUMMARY: N hazards displayed (E errors, W warnings)".
                summary = re.search(r"=+ ERROR SUMMARY: (\d+) error", output) or \
                    re.search(r"=+ RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) error", output)
                if not summary:
                    # No summary: the tool did not attach (unsupported GPU or driver, refused by the runtime).
                    first = next((ln for ln in output.splitlines() if "=====" in ln or "rror" in ln), "no summary")
                    return None, f"compute-sanitizer refused or did not attach: {first.strip()[:200]}", {}
                errors = int(summary.group(1))
                return rc == 0 and errors == 0, f"{errors} errors (exit {rc})", {"errors": errors}

            san = [cs, "--tool", tool, "--error-exitcode", "99"]
            if tool == "racecheck":
                san += ["--racecheck-report", "all"]
            r.step(name, "sanitizer", san + cmd, limit, check=san_check, cwd=cwd, env={**base_env, **env},
                   required=False)

    # --- the sync across namespace hosts -------------------------------------------
    # Where the host has cores to spare, 4 namespace hosts on 10 Gb/s links put
    # the links, not the CPUs, at the limit: geeps f32 against gloo there is
    # docs/network.md's "With cores to spare". Last, so that it only uses time
    # the GPU steps left.
    net_name = "figures: sync across 4 namespace hosts at 10 Gb/s, geeps f32 against gloo " \
               "(cubic, 32 stripes; send window 2 and none)"

    def net_check(rc, output):
        if rc == 3:
            why = next((ln for ln in output.splitlines() if ln.startswith("net:")), "the cluster is not possible here")
            return None, why, {}
        if rc != 0:
            return False, "", {}
        runs = {"2": [], "0": []}
        window = None
        for line in output.splitlines():
            m = re.match(r"^net: window (\d+), run", line)
            if m:
                window = m.group(1)
                runs[window].append({})
            m = re.match(r"^sync: 4 ranks, (geeps engine|gloo \(PyTorch\)): ([\d.]+) ms per clock", line)
            if m and window in runs:
                runs[window][-1]["f32" if m.group(1) == "geeps engine" else "gloo"] = float(m.group(2))
        if not all(runs[w] and all("f32" in run for run in runs[w]) for w in runs):
            return False, "a run gave no geeps f32 figure", {}
        figs, parts = {}, []
        for w, label in (("2", "window 2"), ("0", "no window")):
            figs[f"geeps f32 ms, {label}"] = [run["f32"] for run in runs[w]]
            if all("gloo" in run for run in runs[w]):
                ratios = [round(run["f32"] / run["gloo"], 3) for run in runs[w]]
                figs[f"gloo ms, {label} runs"] = [run["gloo"] for run in runs[w]]
                figs[f"f32 / gloo, {label}"] = ratios
                parts.append(f"{label}: f32/gloo {', '.join(f'{x:.2f}' for x in ratios)}")
            else:
                parts.append(f"{label}: f32 {', '.join(str(x) for x in figs[f'geeps f32 ms, {label}'])} ms "
                             "(no gloo: PyTorch missing)")
        return True, "; ".join(parts), figs

    if r.wanted(net_name):
        # --quick: one run each way, to prove the step; a real run takes three.
        r.step(net_name, "figures",
               ["bash", bundle / "scripts/gpu-check.d/net.sh", bundle, work, "1" if a.quick else "3"], 240,
               check=net_check, cwd=work, env={"PYTHON": sys.executable}, required=False)

    # --- the report ---------------------------------------------------------------
    failed = [s for s in r.steps if s["status"] == "failed"]
    report = {
        "started": started.isoformat(timespec="seconds"),
        "seconds": round(time.monotonic() - r.start, 1),
        "device": device,
        "timings_meaningful": not emulated,
        "quick": a.quick,
        "lenet_iterations": iters,
        "bundle": {k: manifest.get(k) for k in ("commit", "version", "packed")},
        "result": "failed" if failed else "passed",
        "counts": {st: sum(1 for s in r.steps if s["status"] == st) for st in ("passed", "failed", "not run")},
        "steps": r.steps,
    }
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "report.md").write_text(markdown(report))
    c = report["counts"]
    print(f"==> {report['result'].upper()}: {c['passed']} passed, {c['failed']} failed, {c['not run']} not run, "
          f"in {report['seconds']:.0f} s; report: {out / 'report.md'} and report.json")
    sys.exit(1 if failed else 0)


def markdown(rep):
    d = rep["device"]
    lines = [
        "# geeps GPU check",
        "",
        f"- started {rep['started']}, {rep['seconds']:.0f} s in all; bundle {rep['bundle']['version']} "
        f"at {rep['bundle']['commit']} (packed {rep['bundle']['packed']})",
        f"- device: {d.get('nvidia-smi') or 'nvidia-smi not found'}; driver's view: "
        f"{' '.join(ln.split(':', 1)[1].strip() for ln in (d.get('device_query') or '').splitlines() if ln.strip().startswith(('Name:', 'Driver CUDA')) ) or 'n/a'}",
        f"- result: **{rep['result'].upper()}** ({rep['counts']['passed']} passed, {rep['counts']['failed']} failed, "
        f"{rep['counts']['not run']} not run); LeNet {rep['lenet_iterations']} iterations",
    ]
    if not rep["timings_meaningful"]:
        lines.append("- **emulated driver (cuda-emu): every step is functional only; timings and figures "
                     "are NOT meaningful**")
    lines += ["", "| step | result | time | notes |", "|---|---|---|---|"]
    for s in rep["steps"]:
        res = {"passed": "passed", "failed": "**FAILED**", "not run": "NOT RUN"}[s["status"]]
        note = s["note"].replace("|", "\\|")
        lines.append(f"| {s['name']} | {res} | {s['seconds']:.1f} s | {note} |")
    figs = [s for s in rep["steps"] if s["group"] in ("figures", "lenet") and s["figures"]]
    if figs:
        lines += ["", "## Figures", ""]
        for s in figs:
            lines.append(f"- {s['name']}:")
            for k, v in s["figures"].items():
                if k == "stall.json":
                    continue
                lines.append(f"  - {k}: {json.dumps(v) if isinstance(v, (dict, list)) else v}")
    fails = [s for s in rep["steps"] if s["status"] == "failed"]
    if fails:
        lines += ["", "## Failures", ""]
        for s in fails:
            lines += [f"### {s['name']}", "", f"{s['note']} (log: {s.get('log', 'n/a')})", "", "```",
                      s.get("tail", ""), "```", ""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
