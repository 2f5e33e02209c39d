#!/usr/bin/env python3
"""Checks assets/k8s offline: every manifest of a built-in kind against the Kubernetes
schemas kubernetes-validate bundles (--strict: an unknown field fails), and what no schema
checks: the ServiceMonitor (a Prometheus Operator resource, whose schema is not bundled)
has the fields the Operator reads, and the three manifests agree with each other (the
Service selects the DaemonSet's pods, its port names the container's, the ServiceMonitor
selects the Service and names its port, one namespace), and the exporter's container keeps
the properties docs/deploy.md promises (hostPID, a read-only root, resource limits).

    python3 scripts/check_k8s.py [DIR]      # DIR: assets/k8s by default
    python3 scripts/check_k8s.py --self-test   # a broken copy must fail

Needs kubernetes-validate and PyYAML (the tools venv of .ci/dist-tools)."""

import copy
import pathlib
import subprocess
import sys
import tempfile

import yaml


def load(folder):
    docs = {}
    for path in sorted(pathlib.Path(folder).glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs[doc["kind"]] = (path, doc)
    return docs


def consistency(docs):
    """Every disagreement between the manifests, as lines."""
    errors = []
    need = ("DaemonSet", "Service", "ServiceMonitor")
    missing = [k for k in need if k not in docs]
    if missing:
        return ["missing: %s" % ", ".join(missing)]
    ds, svc, sm = (docs[k][1] for k in need)
    namespaces = {d["metadata"].get("namespace") for d in (ds, svc, sm)}
    if len(namespaces) != 1:
        errors.append("namespaces differ: %s" % sorted(map(str, namespaces)))
    pod = ds["spec"]["template"]
    labels = pod["metadata"].get("labels", {})
    if not pod["spec"].get("hostPID"):
        errors.append("DaemonSet: hostPID must be true (NVML names host pids)")
    for key, value in ds["spec"]["selector"]["matchLabels"].items():
        if labels.get(key) != value:
            errors.append("DaemonSet: its selector %s=%s misses its pods" % (key, value))
    containers = pod["spec"]["containers"]
    ports = {p["name"] for c in containers for p in c.get("ports", [])}
    for c in containers:
        sc = c.get("securityContext", {})
        if sc.get("readOnlyRootFilesystem") is not True:
            errors.append("container %s: readOnlyRootFilesystem must be true" % c["name"])
        if sc.get("allowPrivilegeEscalation") is not False:
            errors.append("container %s: allowPrivilegeEscalation must be false" % c["name"])
        limits = c.get("resources", {}).get("limits", {})
        if "memory" not in limits or "cpu" not in limits:
            errors.append("container %s: needs cpu and memory limits" % c["name"])
    for key, value in svc["spec"]["selector"].items():
        if labels.get(key) != value:
            errors.append("Service: its selector %s=%s misses the DaemonSet's pods" % (key, value))
    svc_ports = {p.get("name") for p in svc["spec"]["ports"]}
    for p in svc["spec"]["ports"]:
        target = p.get("targetPort")
        if isinstance(target, str) and target not in ports:
            errors.append("Service: targetPort %s is no container port" % target)
    if sm.get("apiVersion") != "monitoring.coreos.com/v1":
        errors.append("ServiceMonitor: apiVersion must be monitoring.coreos.com/v1")
    spec = sm.get("spec", {})
    svc_labels = svc["metadata"].get("labels", {})
    for key, value in spec.get("selector", {}).get("matchLabels", {}).items():
        if svc_labels.get(key) != value:
            errors.append("ServiceMonitor: its selector %s=%s misses the Service" % (key, value))
    if not spec.get("selector", {}).get("matchLabels"):
        errors.append("ServiceMonitor: spec.selector.matchLabels is empty")
    wanted = spec.get("namespaceSelector", {}).get("matchNames")
    if wanted is not None and svc["metadata"].get("namespace") not in wanted:
        errors.append("ServiceMonitor: namespaceSelector misses the Service's namespace")
    known = {"port", "path", "interval", "scrapeTimeout", "honorLabels", "scheme",
             "relabelings", "metricRelabelings", "targetPort"}
    endpoints = spec.get("endpoints") or []
    if not endpoints:
        errors.append("ServiceMonitor: no endpoints")
    for e in endpoints:
        unknown = set(e) - known
        if unknown:
            errors.append("ServiceMonitor endpoint: unknown fields %s" % sorted(unknown))
        if e.get("port") not in svc_ports:
            errors.append("ServiceMonitor endpoint: port %s is no Service port" % e.get("port"))
    return errors


def check(folder, quiet=False):
    """0 when the folder's manifests pass, else 1 with every failure on stderr (none when
    `quiet`)."""
    docs = load(folder)
    builtin = [str(path) for kind, (path, _) in sorted(docs.items()) if kind != "ServiceMonitor"]
    out = subprocess.run(
        ["kubernetes-validate", "--strict", "--quiet"] + builtin,
        capture_output=True, text=True)
    failed = out.returncode != 0 or "WARN" in out.stdout + out.stderr
    errors = consistency(docs)
    if not quiet:
        if failed:
            sys.stderr.write(out.stdout + out.stderr)
        for e in errors:
            sys.stderr.write("check_k8s: %s\n" % e)
    return 1 if failed or errors else 0


def self_test(folder):
    """Broken copies must fail: a misspelt field (the schema's check) and a ServiceMonitor
    that names a port the Service lacks (this script's own)."""
    docs = load(folder)
    with tempfile.TemporaryDirectory() as tmp:
        for name, breaks in [
            ("misspelt field", lambda d: d["DaemonSet"][1]["spec"]["template"]["spec"]
             .update({"hostPid": True})),
            ("wrong port", lambda d: d["ServiceMonitor"][1]["spec"]["endpoints"][0]
             .update({"port": "web"})),
            ("no limits", lambda d: d["DaemonSet"][1]["spec"]["template"]["spec"]
             ["containers"][0]["resources"].pop("limits")),
        ]:
            broken = copy.deepcopy(docs)
            breaks(broken)
            here = pathlib.Path(tmp, name.replace(" ", "-"))
            here.mkdir()
            for kind, (path, doc) in broken.items():
                (here / path.name).write_text(yaml.safe_dump(doc))
            if check(here, quiet=True) == 0:
                sys.stderr.write("check_k8s: the self-test's %s passed\n" % name)
                return 1
    return check(folder)


def main():
    args = sys.argv[1:]
    if args[:1] == ["--self-test"]:
        folder = args[1] if len(args) > 1 else "assets/k8s"
        sys.exit(self_test(folder))
    sys.exit(check(args[0] if args else "assets/k8s"))


if __name__ == "__main__":
    main()
