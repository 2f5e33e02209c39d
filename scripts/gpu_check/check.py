"""The checker behind `scripts/gpu-check` (issue 29 §4): runs job.py under `vramscope run
--sites` (in the monitor, in tmux, when tmux exists) with `vramscope serve` and `vramscope
record` beside it, and compares, at each moment the job holds still, what vramscope shows
with what nvidia-smi and torch.cuda.memory_stats() say; then the fatal OOM's story in the
monitor's screen, the report, /metrics and the snapshot; then step time with and without the
writer. One line per check: PASS, FAIL or SKIP, with the figures compared; INFO lines say
what was measured without a verdict. Exit status 1 when any check failed.

Standard library only: the job needs torch, this file does not.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

MIB = 1 << 20
GIB = 1 << 30
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
JOB = os.path.join(HERE, "job.py")
# How long the checker waits after the job holds still before it reads anything: the writer
# samples at 20 Hz (50 ms), serve and record refresh every 200 ms; 600 ms covers several of
# each, so every reading is of the held state.
SETTLE_S = 0.6
REFRESH = "200ms"
MOMENTS = ["warm", "in-spike", "after-spike", "caught"]
# NVML counts the CUDA context, cuBLAS's and the driver's own memory beside the allocator's
# reserve: what a process holds outside the allocator is at least 0 and, for this small job,
# well under this bound.
OUTSIDE_MAX = 4 * GIB

RESULTS = []


def say(status, name, detail=""):
    RESULTS.append(status)
    print("%-4s %s%s" % (status, name, (": " + detail) if detail else ""), flush=True)


def info(text):
    print("INFO " + text, flush=True)


def human(n):
    if not isinstance(n, (int, float)) or isinstance(n, bool):
        return repr(n)
    for unit, size in (("GiB", GIB), ("MiB", MIB)):
        if abs(n) >= size:
            return "%d (%.2f %s)" % (n, n / size, unit)
    return str(n)


def compare(name, sources, show=human):
    """PASS when every source gives the same value (and none is missing)."""
    values = [v for _, v in sources]
    ok = all(v is not None for v in values) and len(set(values)) == 1
    text = " = ".join("%s %s" % (src, show(v)) for src, v in sources)
    say("PASS" if ok else "FAIL", name, text if ok else text.replace(" = ", " | "))
    return ok


class Checker:
    def __init__(self, args):
        self.args = args
        self.sim = args.simulated
        self.dir = tempfile.mkdtemp(prefix="vramscope-gpu-check-")
        self.channels = os.path.join(self.dir, "channels")
        os.mkdir(self.channels, 0o700)
        self.vs = args.vramscope
        self.py = args.python
        self.children = []
        self.tmux_socket = None
        self.job_popen = None
        env = dict(os.environ)
        env.pop("XDG_RUNTIME_DIR", None)
        env.update(
            {
                # Only this run's channels, no configuration file, no Kubernetes node.
                "VRAMSCOPE_DIR": self.channels,
                "VRAMSCOPE_SHM": os.path.join(self.dir, "no-shm"),
                "VRAMSCOPE_CONFIG": "none",
                "VRAMSCOPE_K8S_ROOT": os.path.join(self.dir, "no-node"),
                "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONUNBUFFERED": "1",
                "GPU_CHECK_REPO": REPO,
            }
        )
        for k in ("VRAMSCOPE_NVML_LIB", "VRAMSCOPE_INTERVAL", "VRAMSCOPE_SITES", "VRAMSCOPE_DISABLE", "VRAMSCOPE_HZ", "VRAMSCOPE_PEAK"):
            env.pop(k, None)
        if self.sim:
            self.scenario = os.path.join(self.dir, "scenario.json")
            env.update({"GPU_CHECK_SIMULATED": "1", "VRAMSCOPE_NVML_LIB": args.fake_nvml, "FAKE_NVML_SCENARIO": self.scenario})
        self.env = env

    # -- tools ------------------------------------------------------------------------------

    def run(self, argv, timeout=60, env=None, **kw):
        try:
            return subprocess.run(argv, env=env or self.env, capture_output=True, text=True, timeout=timeout, **kw)
        except subprocess.TimeoutExpired as e:
            return subprocess.CompletedProcess(argv, 124, e.stdout or "", (e.stderr or "") + "\n(timed out after %ss)" % timeout)

    def vs_json(self):
        out = self.run([self.vs, "--json"], timeout=30)
        try:
            return json.loads(out.stdout)
        except ValueError:
            return {"error": out.stderr.strip()}

    def smi(self):
        """What nvidia-smi says now: {uuid: (used MiB, total MiB)}, {(pid, uuid): used MiB}."""
        if self.sim:
            with open(self.scenario) as f:
                sc = json.load(f)
            gpus, apps = {}, {}
            for d in sc["devices"]:
                gpus[d["uuid"]] = (d["timeline"][-1]["memory_used"] // MIB, d["memory_total"] // MIB)
                for p in d["processes"][-1]["compute"]:
                    apps[(p["pid"], d["uuid"])] = p["used_memory"] // MIB
            return gpus, apps
        q = self.run(["nvidia-smi", "--query-gpu=uuid,memory.used,memory.total", "--format=csv,noheader,nounits"], timeout=30)
        a = self.run(["nvidia-smi", "--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits"], timeout=30)
        gpus, apps = {}, {}
        for line in q.stdout.splitlines():
            f = [x.strip() for x in line.split(",")]
            if len(f) == 3 and f[1].isdigit():
                gpus[f[0]] = (int(f[1]), int(f[2]))
        for line in a.stdout.splitlines():
            f = [x.strip() for x in line.split(",")]
            if len(f) == 3 and f[0].isdigit() and f[2].isdigit():
                apps[(int(f[0]), f[1])] = int(f[2])
        return gpus, apps

    def scrape(self):
        try:
            with urllib.request.urlopen(self.metrics_url, timeout=10) as r:
                return parse_metrics(r.read().decode())
        except OSError as e:
            return {"error": str(e)}

    def spawn(self, argv, **kw):
        p = subprocess.Popen(argv, env=self.env, **kw)
        self.children.append(p)
        return p

    def tmux(self, *args):
        return self.run(["tmux", "-L", self.tmux_socket, "-f", "/dev/null"] + list(args), timeout=20)

    def cleanup(self):
        if self.tmux_socket:
            self.tmux("kill-server")
        for p in self.children:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    # -- the run ----------------------------------------------------------------------------

    def machine(self):
        v = self.run([self.vs, "--version"])
        info("vramscope %s (%s); python %s" % (v.stdout.strip(), self.vs, self.py))
        t = self.run([self.py, "-c", "import torch; print(torch.__version__, torch.version.cuda)"])
        info("torch %s" % (t.stdout.strip() or t.stderr.strip()[-200:]))
        if self.sim:
            info("simulated: no GPU; torch's driver is python/tests/_simulated_cuda.py, NVML is %s" % self.args.fake_nvml)
            info("simulated: nvidia-smi figures are the fake driver's scenario (%s)" % self.scenario)
        else:
            s = self.run(["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version", "--format=csv,noheader"])
            info("nvidia-smi: %s" % (s.stdout.strip() or s.stderr.strip()))

    def start_beside(self):
        self.record_file = os.path.join(self.dir, "story.jsonl")
        self.recorder = self.spawn([self.vs, "record", "--interval", REFRESH, "-o", self.record_file], stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "record.err"), "w"))
        serve_err = os.path.join(self.dir, "serve.err")
        self.server = self.spawn([self.vs, "serve", "--listen", "127.0.0.1:0", "--interval", REFRESH], stdout=subprocess.DEVNULL, stderr=open(serve_err, "w"))
        deadline = time.monotonic() + 30
        self.metrics_url = None
        while time.monotonic() < deadline and not (self.metrics_url and os.path.exists(self.record_file)):
            m = re.search(r"serving (http://\S+/metrics)", open(serve_err).read())
            self.metrics_url = m.group(1) if m else None
            if self.server.poll() is not None or self.recorder.poll() is not None:
                break
            time.sleep(0.05)
        ok = bool(self.metrics_url) and os.path.exists(self.record_file)
        say("PASS" if ok else "FAIL", "serve and record started", "serve at %s, recording %s" % (self.metrics_url, self.record_file))
        return ok

    def start_job(self):
        self.log = os.path.join(self.dir, "job.log")
        self.rc_file = os.path.join(self.dir, "run.rc")
        job = [self.py, JOB, "story"]
        env = dict(self.env, GPU_CHECK_DIR=self.dir)
        if shutil.which("tmux") and not self.args.no_tmux:
            self.tmux_socket = "vramscope-gpu-check-%d" % os.getpid()
            assigns = " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in sorted(env.items()) if k.startswith(("VRAMSCOPE_", "GPU_CHECK_", "FAKE_NVML_", "PYTHON")) or k in ("PATH", "HOME", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES"))
            line = "cd %s && env -u XDG_RUNTIME_DIR %s TERM=xterm-256color %s run --sites --interval 500ms --log %s -- %s; echo $? > %s; sleep 30" % (
                shlex.quote(REPO), assigns, shlex.quote(self.vs), shlex.quote(self.log), " ".join(map(shlex.quote, job)), shlex.quote(self.rc_file))
            out = self.run(["tmux", "-L", self.tmux_socket, "-f", "/dev/null", "new-session", "-d", "-s", "gpucheck", "-x", "160", "-y", "50", "sh", "-c", line], timeout=20)
            if out.returncode != 0:
                say("FAIL", "the monitor started in tmux", out.stderr.strip())
                self.tmux_socket = None
                return False
            info("the job runs under `vramscope run --sites` in the monitor, in tmux (socket %s), its output in %s" % (self.tmux_socket, self.log))
        else:
            info("tmux absent: the job runs under `vramscope run --sites --no-monitor`")
            self.job_popen = subprocess.Popen([self.vs, "run", "--sites", "--no-monitor", "--"] + job, env=env, stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
            self.children.append(self.job_popen)
        return True

    def job_alive(self):
        """False once the job's own process (its pid file) is gone."""
        if self.job_rc() is not None:
            return False
        try:
            pid = int(open(os.path.join(self.dir, "job.pid")).read())
        except (OSError, ValueError):
            return True  # not started yet
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return open("/proc/%d/stat" % pid).read().split(") ")[-1][0] != "Z" if os.path.exists("/proc/%d/stat" % pid) else False

    def job_rc(self):
        if self.job_popen:
            return self.job_popen.poll()
        try:
            return int(open(self.rc_file).read().strip())
        except (OSError, ValueError):
            return None

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "gpucheck").stdout

    def wait_screen(self, done, limit=10):
        start = time.monotonic()
        while True:
            scr = self.screen()
            if done(scr) or time.monotonic() - start > limit:
                return scr
            time.sleep(0.2)

    def readings(self, name, record):
        smi0 = self.smi()
        snap = self.vs_json()
        # serve's snapshot must be one taken after the job began to hold still (a loaded
        # machine may have delayed its refresh).
        deadline = time.monotonic() + 10
        while True:
            metrics = self.scrape()
            at = metric(metrics, "vramscope_snapshot_timestamp_seconds", None)
            if (at is not None and at * 1000 >= record["time_ms"] + 100) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        smi1 = self.smi()
        r = {"record": record, "smi": (smi0, smi1), "json": snap, "metrics": metrics, "window_ms": (record["time_ms"] + 200, time.time() * 1000.0)}
        if name == "caught" and self.tmux_socket:
            # The monitor refreshes every 500 ms; on a loaded machine a refresh comes late:
            # the job holds still until the screen shows its step (at most 10 s).
            a = allocator_of(snap, record["pid"]) or {}
            start = time.monotonic()
            while True:
                r["screen"] = self.screen()
                if screen_row_ok(r["screen"], a.get("pid"), record["steps"]) or time.monotonic() - start > 10:
                    break
                time.sleep(0.2)
            r["screen_wait_s"] = time.monotonic() - start
        return r

    def follow(self):
        self.moments = {}
        for i, name in enumerate(MOMENTS):
            path = os.path.join(self.dir, name + ".json")
            deadline = time.monotonic() + (180 if i == 0 else 90)
            while not os.path.exists(path):
                alive = self.job_alive()
                if not alive or time.monotonic() > deadline:
                    say("FAIL", "the job held still at %s" % name, "the job %s first; its log: %s" % ("ended" if not alive else "did not get there in time", tail(self.log)))
                    return False
                time.sleep(0.02)
            record = json.load(open(path))
            time.sleep(SETTLE_S)
            self.moments[name] = self.readings(name, record)
            open(os.path.join(self.dir, name + ".go"), "w").close()
        return True

    def wait_end(self):
        """The fatal OOM: the job's writer ends with an error, the job exits."""
        deadline = time.monotonic() + 90
        pid = self.moments["warm"]["record"]["pid"]
        final = None
        while time.monotonic() < deadline:
            final = self.vs_json()
            a = allocator_of(final, pid)
            if a and str(a.get("writer", "")).startswith("ended"):
                break
            time.sleep(0.2)
        self.final = final
        self.final_screen = None
        if self.tmux_socket:
            # The monitor's screen once it has seen the end, then its detail pane (Enter), once
            # drawn: each waited for at most 10 s (a loaded machine delays a refresh).
            said = "job %d exited with code" % pid
            self.final_screen = self.wait_screen(lambda scr: said in scr)
            self.tmux("send-keys", "-t", "gpucheck", "Enter")  # the selected process's detail pane
            self.final_detail = self.wait_screen(lambda scr: "OOM fatal" in scr and "at the OOM: the request" in scr)
            self.tmux("send-keys", "-t", "gpucheck", "q")
            time.sleep(0.3)
            self.tmux("send-keys", "-t", "gpucheck", "q")
        rc = None
        while time.monotonic() < deadline + 30 and rc is None:
            rc = self.job_rc()
            time.sleep(0.1)
        self.rc = rc
        # /metrics once serve has seen the end (it keeps an exited process for --grace).
        host = host_pid(final, pid)
        end = time.monotonic() + 15
        while True:
            m = self.scrape()
            if metric(m, "vramscope_process_allocator_ooms_total", host) == 2 or time.monotonic() > end:
                break
            time.sleep(0.2)
        self.final_metrics = m
        # The recording, once it holds the writer's end.
        end = time.monotonic() + 30
        while '"state":"ended"' not in open(self.record_file).read() and time.monotonic() < end:
            time.sleep(0.1)
        self.server.send_signal(signal.SIGTERM)
        self.recorder.send_signal(signal.SIGINT)
        for p, what in ((self.server, "serve"), (self.recorder, "record")):
            try:
                code = p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                code = "killed"
            say("PASS" if code == 0 else "FAIL", "%s stopped cleanly" % what, "exit status %s" % code)

    # -- the checks -------------------------------------------------------------------------

    def check_moments(self):
        rec_devices, rec_polls = read_recording(self.record_file)
        for name in MOMENTS:
            r = self.moments.get(name)
            if not r:
                continue
            rec, snap, m = r["record"], r["json"], r["metrics"]
            t = rec["torch"]
            pid = rec["pid"]
            a = allocator_of(snap, pid)
            if not a or not a.get("devices"):
                say("FAIL", "[%s] the job's channel in --json" % name, "no allocator for pid %d: %s" % (pid, str(snap)[:300]))
                continue
            d = a["devices"][0]
            host = a.get("pid")
            gpu = next((g for g in snap.get("devices", []) if g.get("index") == d.get("gpu_index")), None)
            proc = next((p for p in snap.get("processes", []) if p.get("pid") == host and p.get("gpu_index") == d.get("gpu_index")), None)
            if gpu is None or proc is None:
                say("FAIL", "[%s] the job's GPU and process in --json" % name, "gpu_index %r, pid %r: %s" % (d.get("gpu_index"), host, str(snap)[:300]))
                continue
            uuid = gpu.get("uuid")
            (g0, a0), (g1, a1) = r["smi"]
            labels = {"uuid": uuid}
            # NVML, as nvidia-smi reads it (whole MiB, rounded down) at the same instant.
            smi_used = agreeing(g0.get(uuid, (None,))[0], g1.get(uuid, (None,))[0], gpu.get("memory_used"))
            lo, hi = r["window_ms"]
            recd = [x for x in rec_devices if x["index"] == gpu["index"] and lo <= x["at_ms"] <= hi]
            compare("[%s] GPU used (NVML) MiB" % name, [
                ("nvidia-smi", smi_used),
                ("--json", mib(gpu.get("memory_used"))),
                ("/metrics DCGM_FI_DEV_FB_USED", metric(m, "DCGM_FI_DEV_FB_USED", None, UUID=uuid)),
                ("/metrics vramscope_gpu_memory_used_bytes", mib(metric(m, "vramscope_gpu_memory_used_bytes", None, **labels))),
                ("record (%d samples)" % len(recd), same(mib(x["used"]) for x in recd)),
            ], show=str)
            compare("[%s] GPU total (NVML) MiB" % name, [
                ("nvidia-smi", agreeing(g0.get(uuid, (0, None))[1], g1.get(uuid, (0, None))[1], None)),
                ("--json", mib(gpu.get("memory_total"))),
                ("/metrics vramscope_gpu_memory_total_bytes", mib(metric(m, "vramscope_gpu_memory_total_bytes", None, **labels))),
            ], show=str)
            compare("[%s] job pid %s used (NVML) MiB" % (name, host), [
                ("nvidia-smi --query-compute-apps", agreeing(a0.get((host, uuid)), a1.get((host, uuid)), proc.get("used_memory"))),
                ("--json", mib(proc.get("used_memory"))),
                ("/metrics vramscope_process_memory_used_bytes", mib(metric(m, "vramscope_process_memory_used_bytes", host))),
                ("record (%d samples)" % len(recd), same(mib(x["procs"].get(host)) for x in recd)),
            ], show=str)
            polls = [p for p in rec_polls if p["pid"] in (pid, host) and lo <= p["at_ms"] <= hi]
            for label, key, tkey, mname in (
                ("allocated", "allocated", "allocated", "vramscope_process_allocator_allocated_bytes"),
                ("reserved", "reserved", "reserved", "vramscope_process_allocator_reserved_bytes"),
            ):
                compare("[%s] %s bytes" % (name, label), [
                    ("torch.cuda.memory_stats", t[tkey]),
                    ("--json", d.get(key)),
                    ("/metrics", metric(m, mname, host)),
                    ("record (%d polls)" % len(polls), same(p[key] for p in polls)),
                ])
            compare("[%s] peak allocated bytes" % name, [
                ("torch allocated_bytes.all.peak", t["allocated_peak"]),
                ("--json allocated_peak", d.get("allocated_peak")),
                ("--json true_peak", d.get("true_peak")),
                ("/metrics vramscope_process_allocator_peak_bytes", metric(m, "vramscope_process_allocator_peak_bytes", host)),
            ])
            compare("[%s] optimizer steps" % name, [
                ("job's optimizer.step() calls", rec["steps"]),
                ("Adam's state step", rec["adam_step"]),
                ("--json step", a.get("step")),
                ("/metrics vramscope_process_step", metric(m, "vramscope_process_step", host)),
                ("record (%d polls)" % len(polls), same(p["step"] for p in polls)),
            ], show=str)
            compare("[%s] OOMs" % name, [
                ("torch num_ooms", t["num_ooms"]),
                ("--json ooms", d.get("ooms")),
                ("/metrics vramscope_process_allocator_ooms_total", metric(m, "vramscope_process_allocator_ooms_total", host)),
            ], show=str)
            outside = proc.get("used_memory", 0) - t["reserved"] if proc.get("used_memory") is not None else None
            say("PASS" if outside is not None and 0 <= outside <= OUTSIDE_MAX else "FAIL", "[%s] outside the allocator (NVML used - torch reserved: CUDA context and libraries)" % name,
                "%s, bound 0..%s" % (human(outside), human(OUTSIDE_MAX)))
        self.check_spike()
        self.check_caught_screen()

    def check_spike(self):
        s, after = self.moments.get("in-spike"), self.moments.get("after-spike")
        if not s or not after:
            say("FAIL", "the spike inside one step", "the job did not hold still around it")
            return
        rs, ra = s["record"], after["record"]
        ok = ra["steps"] == rs["steps"] + 1 and ra["spike_step"] == rs["steps"]
        ok = ok and ra["torch"]["allocated"] + rs["spike_bytes"] <= rs["allocated_at_spike"] and ra["torch"]["allocated_peak"] == rs["allocated_at_spike"]
        say("PASS" if ok else "FAIL", "the spike inside one step",
            "%s live during step %d (allocated %s), freed before its optimizer step (after: allocated %s, step %d), the peak stays %s"
            % (human(rs["spike_bytes"]), rs["steps"], human(rs["allocated_at_spike"]), human(ra["torch"]["allocated"]), ra["steps"], human(ra["torch"]["allocated_peak"])))

    def check_caught_screen(self):
        if not self.tmux_socket:
            say("SKIP", "the monitor's screen at the caught OOM", "tmux is not installed")
            return
        c = self.moments.get("caught")
        if not c:
            return
        scr = c.get("screen", "")
        host = allocator_of(c["json"], c["record"]["pid"]).get("pid")
        steps = c["record"]["steps"]
        # The process table's row: PID ... STEP COMMAND (the job's program and script).
        rows = [l.strip() for l in scr.splitlines() if re.match(r"\s*%s\*?\s" % host, l)]
        ok = screen_row_ok(scr, host, steps)
        say("PASS" if ok else "FAIL", "the monitor's screen at the caught OOM: the job's row with its step", (rows[0] if rows else "no row for pid %s" % host) + " (step %d expected; shown %.1f s after the readings)" % (steps, c.get("screen_wait_s", 0)))
        write(os.path.join(self.dir, "screen-caught.txt"), scr)

    def check_end(self):
        caught = self.moments["caught"]["record"]
        fatal_path = os.path.join(self.dir, "fatal.json")
        fatal = json.load(open(fatal_path)) if os.path.exists(fatal_path) else None
        pid = caught["pid"]
        log = open(self.log, errors="replace").read() if os.path.exists(self.log) else ""
        ok = self.rc == 1 and "torch.OutOfMemoryError" in log and ("batch %d skipped: CUDA out of memory" % 8) in log
        say("PASS" if ok else "FAIL", "the job: caught OOM skipped, fatal OOM uncaught", "exit status %s, %s" % (self.rc, "its log says both" if ok else "log: " + tail(self.log)))
        if not fatal:
            say("FAIL", "the fatal OOM", "the job never reached it")
            return
        a = allocator_of(self.final, pid) or {}
        # NVML's pid for the job, read while it ran (an ended writer's is null: NVML no
        # longer lists it).
        host = (allocator_of(self.moments["caught"]["json"], pid) or {}).get("pid")
        d = (a.get("devices") or [{}])[0]
        ooms = a.get("ooms") or []
        want = [("caught", caught["request"], caught["steps"]), ("fatal", fatal["request"], fatal["steps"])]
        got = [(o.get("outcome"), o.get("requested"), o.get("step")) for o in ooms]
        say("PASS" if got == want and d.get("ooms") == 2 and str(a.get("writer")).startswith("ended") else "FAIL",
            "--json after the end: writer ended, both OOMs",
            "writer %r, ooms %r, (outcome, requested, step) %r, expected %r" % (a.get("writer"), d.get("ooms"), got, want))
        m = self.final_metrics
        compare("/metrics after the end: OOMs and peak", [
            ("torch at the fatal OOM: ooms+1", fatal["torch"]["num_ooms"] + 1),
            ("vramscope_process_allocator_ooms_total", metric(m, "vramscope_process_allocator_ooms_total", host)),
        ], show=str)
        peak = self.moments["after-spike"]["record"]["torch"]["allocated_peak"]
        compare("/metrics after the end: peak", [
            ("torch's peak (the spike)", peak),
            ("vramscope_process_allocator_peak_bytes", metric(m, "vramscope_process_allocator_peak_bytes", host)),
        ])
        self.check_report(caught, fatal, peak, host)
        # Read while the job held still at its caught OOM, when fewer events had passed.
        self.check_kinds(allocator_of(self.moments["caught"]["json"], pid) or {}, caught)
        self.check_final_screen(host)

    def check_kinds(self, allocator, caught):
        """Memory by kind: the writer's last MEMORY_KINDS event against the job's own count of
        its parameters and Adam's state on the GPU."""
        want = caught.get("kinds") or {}
        if not want.get("parameters"):
            say("SKIP", "memory by kind", "the job's tensors are not on a GPU (the simulated run keeps them on the CPU)")
            return
        events = [e for e in allocator.get("recent_events") or [] if e.get("kind") == "memory_kinds"]
        got = (events[-1].get("figures") or {}) if events else {}
        compare("memory by kind: parameters", [
            ("the job's parameters, 512-byte blocks", want["parameters"]),
            ("vramscope's memory_kinds event", got.get("parameters")),
        ])
        compare("memory by kind: optimizer state", [
            ("the job's Adam state on the GPU", want["optimizer_state"]),
            ("vramscope's memory_kinds event", got.get("optimizer_state")),
        ])

    def check_final_screen(self, host):
        if not self.tmux_socket:
            say("SKIP", "the monitor's screen after the fatal OOM", "tmux is not installed")
            return
        scr, detail = self.final_screen or "", getattr(self, "final_detail", "") or ""
        write(os.path.join(self.dir, "screen-end.txt"), scr)
        write(os.path.join(self.dir, "screen-end-detail.txt"), detail)
        pid = self.moments["caught"]["record"]["pid"]
        said = "job %d exited with code 1" % pid
        say("PASS" if said in scr else "FAIL", "the monitor's screen after the fatal OOM: the job's end", "%r %s (screen in %s)" % (
            said, "shown" if said in scr else "NOT shown", os.path.join(self.dir, "screen-end.txt")))
        fatal = [l.strip() for l in detail.splitlines() if "OOM" in l and "fatal" in l]
        caught = [l.strip() for l in detail.splitlines() if "OOM" in l and "caught" in l]
        site = "job.py:%d story" % marker_line("# FATAL-OOM")
        ok = bool(fatal) and bool(caught) and re.search(r"\b%s\b" % host, detail) is not None and site in detail
        say("PASS" if ok else "FAIL", "the monitor's detail pane (Enter) after the end: pid %s, the caught and the fatal OOM, the request's site" % host,
            "%s | %s | %s %s (screen in %s)" % (caught[0][:110] if caught else "no caught OOM line", fatal[0][:110] if fatal else "no fatal OOM line",
                                             site, "shown" if site in detail else "NOT shown", os.path.join(self.dir, "screen-end-detail.txt")))

    def check_report(self, caught, fatal, peak, host):
        text = self.run([self.vs, "report", self.record_file])
        js = self.run([self.vs, "report", self.record_file, "--json"])
        write(os.path.join(self.dir, "report.txt"), text.stdout + text.stderr)
        write(os.path.join(self.dir, "report.json"), js.stdout + js.stderr)
        lines = text.stdout.splitlines()
        for outcome, rec in (("caught", caught), ("fatal", fatal)):
            hit = [l for l in lines if "(%s): asked for" % outcome in l]
            ok = len(hit) == 1 and hit[0].rstrip().endswith("step %d" % rec["steps"]) and ("pid %s " % host) in hit[0]
            say("PASS" if ok else "FAIL", "report: the %s OOM once, pid %s, step %d" % (outcome, host, rec["steps"]), hit[0].strip() if hit else "no line '(%s): asked for' in %s" % (outcome, self.dir + "/report.txt"))
        try:
            rep = json.loads(js.stdout)
        except ValueError:
            say("FAIL", "report --json", js.stderr.strip()[:300])
            return
        ooms = rep.get("ooms") or []
        got = [(o.get("pid"), o.get("outcome"), o.get("requested"), o.get("step")) for o in ooms]
        want = [(host, "caught", caught["request"], caught["steps"]), (host, "fatal", fatal["request"], fatal["steps"])]
        say("PASS" if got == want else "FAIL", "report --json: the OOMs (pid, outcome, requested, step)", "%r, expected %r" % (got, want))
        proc = next((p for p in rep.get("processes", []) if p.get("pid") == host), None) or {}
        pk = (proc.get("allocator") or {}).get("peak_allocated") or {}
        spike_step = self.moments["after-spike"]["record"]["spike_step"]
        ok = pk.get("bytes") == peak and pk.get("step") == spike_step
        say("PASS" if ok else "FAIL", "report --json: the peak is the spike's, in its step",
            "peak_allocated %s at step %r; torch's peak %s in step %d" % (human(pk.get("bytes")), pk.get("step"), human(peak), spike_step))
        # Each OOM's snapshot, as the report names it, and where its request was made.
        paths = []
        for o, marker in zip(ooms, ("# CAUGHT-OOM", "# FATAL-OOM")):
            held = o.get("held") or {}
            site = (((held.get("sites") or {}).get("oom")) or {}).get("request_site") or {}
            line = marker_line(marker)
            ok = held.get("reason") == "oom" and site.get("line") == line and (site.get("file") or "").endswith("gpu_check/job.py")
            say("PASS" if ok else "FAIL", "report --json: the %s OOM's snapshot and site" % o.get("outcome"), "%s (reason %r), request at %s:%s %s (expected job.py:%d)" % (
                held.get("name"), held.get("reason"), site.get("file"), site.get("line"), site.get("function"), line))
            paths.append(held.get("path"))
        distinct = len(paths) == 2 and paths[0] != paths[1]
        say("PASS" if distinct else "FAIL", "report --json: each OOM under its own snapshot", " , ".join(map(str, paths)))
        self.check_snapshot(paths[-1] if len(paths) == 2 else None, fatal)

    def check_snapshot(self, path, fatal):
        if not path or not os.path.exists(path):
            say("FAIL", "the fatal OOM's snapshot", "none named in report --json, or gone: %r" % path)
            return
        out = self.run([self.vs, "sites", path, "--at", "oom", "--json"])
        text = self.run([self.vs, "sites", path, "--at", "oom"])
        write(os.path.join(self.dir, "sites-fatal.txt"), text.stdout + text.stderr)
        try:
            s = json.loads(out.stdout)
        except ValueError:
            say("FAIL", "vramscope sites on the fatal OOM's snapshot", out.stderr.strip()[:300])
            return
        oom = s.get("oom") or {}
        site = oom.get("request_site") or {}
        line = marker_line("# FATAL-OOM")
        w = s.get("writer") or {}
        t = fatal["torch"]
        ok = oom.get("requested") == fatal["request"] and w.get("reason") == "oom" and w.get("step") == fatal["steps"] and oom.get("allocated") == t["allocated"]
        say("PASS" if ok else "FAIL", "vramscope sites --at oom: %s" % os.path.basename(path),
            "requested %s (the job asked %s), allocated %s (torch %s), dumped for %r at step %r (the job's %d)" % (
                human(oom.get("requested")), human(fatal["request"]), human(oom.get("allocated")), human(t["allocated"]), w.get("reason"), w.get("step"), fatal["steps"]))
        ok = (site.get("file") or "").endswith("gpu_check/job.py") and site.get("line") == line and site.get("function") == "story"
        say("PASS" if ok else "FAIL", "vramscope sites --at oom: the fatal request's site", "%s:%s %s (expected job.py:%d story)" % (site.get("file"), site.get("line"), site.get("function"), line))
        verdict = str(oom.get("verdict"))
        say("PASS" if verdict.startswith("truly full") else "FAIL", "vramscope sites --at oom: the verdict", verdict[:200])

    # -- step time --------------------------------------------------------------------------

    def timing(self):
        steps = 40 if self.sim else 150
        order = ["plain", "writer"] if self.sim else ["plain", "writer", "plain", "writer"]
        best = {}
        tdir = os.path.join(self.dir, "timing-channels")
        os.mkdir(tdir, 0o700)
        env = dict(self.env, VRAMSCOPE_DIR=tdir)
        for mode in order:
            argv = [self.py, JOB, "timing", str(steps)]
            if mode == "writer":
                argv = [self.vs, "run", "--no-monitor", "--"] + argv
            out = self.run(argv, timeout=150, env=env)
            try:
                r = json.loads(out.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                say("FAIL", "step time (%s)" % mode, "exit %s: %s" % (out.returncode, (out.stderr or out.stdout).strip()[-300:]))
                return
            info("step time %s: median %.0f us over %d steps (min %.0f us)" % (mode, r["median_us"], r["steps"], r["min_us"]))
            best[mode] = min(best.get(mode, r["median_us"]), r["median_us"])
        plain, writer = best["plain"], best["writer"]
        figures = "plain %.0f us, under vramscope run %.0f us (%+.2f%%)" % (plain, writer, 100 * (writer - plain) / plain)
        if self.sim:
            # A CPU model on a CPU shared with whatever else runs (a test suite, a CI): its
            # timing judges nothing, so it is said, never passed or failed.
            info("step time with the writer (simulated, not judged: a CPU model on a shared CPU): " + figures)
            return
        bound = plain * 1.01 + 50
        say("PASS" if writer <= bound else "FAIL", "step time with the writer",
            "%s, bound 1.01 x plain + 50 us = %.0f us" % (figures, bound))


# -- readers ------------------------------------------------------------------------------


def tail(path, n=600):
    try:
        return open(path, errors="replace").read()[-n:].replace("\n", " | ")
    except OSError:
        return "(none)"


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def mib(v):
    return v // MIB if isinstance(v, int) and not isinstance(v, bool) else None


def same(values):
    """The one value every reading gave; None when none or they differ."""
    values = list(values)
    return values[0] if values and all(v == values[0] for v in values) else None


def agreeing(before, after, vramscope_bytes):
    """nvidia-smi's figure: read before and after vramscope's; while the job holds still they
    agree. If they do not (another process changed its memory between them), vramscope's
    figure counts as agreeing when it lies between the two."""
    if before is None or after is None:
        return None
    if before == after:
        return before
    v = mib(vramscope_bytes)
    return v if v is not None and min(before, after) <= v <= max(before, after) else "%s..%s" % (before, after)


def allocator_of(snap, pid):
    for a in (snap or {}).get("allocators", []):
        if pid in (a.get("pid_in_namespace"), a.get("pid")):
            return a
    return None


def host_pid(snap, pid):
    a = allocator_of(snap, pid)
    return a.get("pid") if a else pid


def screen_row_ok(screen, host, steps):
    """The process table has one row for `host`, showing `steps` just before the command
    (STEP, then COMMAND: the job's program and script)."""
    rows = [l for l in screen.splitlines() if re.match(r"\s*%s\*?\s" % host, l)]
    return len(rows) == 1 and re.search(r"\s%d\s+\S*python\S*\s+job\.py story" % steps, rows[0]) is not None


def marker_line(marker):
    with open(JOB) as f:
        return next(i + 1 for i, l in enumerate(f) if l.rstrip().endswith(marker))


LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    series = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = LINE.match(line)
        if m:
            labels = dict(LABEL.findall(m.group(2) or ""))
            try:
                series.append((m.group(1), labels, float(m.group(3))))
            except ValueError:
                pass
    return {"series": series}


def metric(m, name, pid, **labels):
    """The one value of `name` for `pid` (label pid) and labels; None when absent or several."""
    if pid is None and name.startswith("vramscope_process_"):
        return None
    vals = []
    for n, l, v in (m or {}).get("series", []):
        if n != name or (pid is not None and l.get("pid") != str(pid)):
            continue
        if all(l.get(k) == str(x) for k, x in labels.items()):
            vals.append(v)
    if len(vals) != 1:
        return None
    v = vals[0]
    return int(v) if v == int(v) else v


def read_recording(path):
    """The GPU samples ({index, at_ms, used, procs}) and channel polls ({pid, at_ms, allocated,
    reserved, step}) of a plain recording."""
    devices, polls, writers = [], [], {}

    def fig(v):
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    with open(path) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if "device" in r:
                d = r["device"]
                mem = d.get("memory")
                procs = d.get("processes")
                devices.append({
                    "index": d.get("index"), "at_ms": d.get("at_ms", 0),
                    "used": fig(mem[2]) if isinstance(mem, list) else None,
                    "procs": {p.get("pid"): fig(p.get("used_memory")) for p in procs} if isinstance(procs, list) else {},
                })
            elif "channels" in r:
                c = r["channels"]
                for p in c.get("polls", []):
                    if "writer" in p:
                        writers[p["path"]] = (p.get("host_pid"), p["writer"].get("pid"))
                    ids = writers.get(p["path"], (None, None))
                    devs = p.get("devices") or []
                    if not devs:
                        continue
                    dv = devs[0]
                    polls.append({
                        "pid": ids[1], "host_pid": ids[0], "at_ms": c.get("at_ms", 0),
                        "allocated": fig(dv.get("allocated")), "reserved": fig(dv.get("reserved")), "step": fig(p.get("step")),
                    })
    return devices, polls


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--simulated", action="store_true")
    ap.add_argument("--vramscope", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--fake-nvml")
    ap.add_argument("--no-tmux", action="store_true")
    ap.add_argument("--no-timing", action="store_true")
    args = ap.parse_args()
    c = Checker(args)

    def stop(signum, frame):
        raise SystemExit("stopped by signal %d" % signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("gpu-check: %s, files in %s" % ("simulated" if args.simulated else "real GPU", c.dir), flush=True)
    try:
        c.machine()
        if args.simulated:
            subprocess.run([args.python, JOB, "idle", c.scenario], env=c.env, check=True, timeout=60)
        if c.start_beside() and c.start_job() and c.follow():
            c.wait_end()
            c.check_moments()
            c.check_end()
        if not args.no_timing:
            c.timing()
    except SystemExit as e:
        say("FAIL", "the check ran to its end", str(e))
    finally:
        c.cleanup()
    counts = {s: RESULTS.count(s) for s in ("PASS", "FAIL", "SKIP")}
    print("SUMMARY %s: %d PASS, %d FAIL, %d SKIP (files in %s)" % (
        "FAIL" if counts["FAIL"] else "PASS", counts["PASS"], counts["FAIL"], counts["SKIP"], c.dir), flush=True)
    sys.exit(1 if counts["FAIL"] or not counts["PASS"] else 0)


if __name__ == "__main__":
    main()
