#!/usr/bin/env python3
"""Checks the deployment files offline (no kubectl here): every YAML parses, every Kubernetes
object has the fields the API server requires and the ones toold relies on (probes on /readyz,
non-root, the Secret keys the Deployment reads, selectors that match), the compose file wires
toold to Postgres, the systemd unit and the Dockerfile have their essentials, and the
ConfigMap's settings parse as TOML. It checks itself first on broken copies, so a check that
cannot fail is caught. Prints `N passed, M failed`; exits non-zero on any failure."""

import copy
import sys
import tomllib
from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parent
ROOT = DEPLOY.parent


def dig(obj, *path):
    for key in path:
        if isinstance(obj, list):
            obj = obj[key] if isinstance(key, int) and key < len(obj) else None
        elif isinstance(obj, dict):
            obj = obj.get(key)
        else:
            return None
    return obj


def check_object(doc):
    """Problems of one Kubernetes object."""
    problems = []
    for field in ("apiVersion", "kind"):
        if not doc.get(field):
            problems.append(f"missing {field}")
    if not dig(doc, "metadata", "name"):
        problems.append("missing metadata.name")
    kind = doc.get("kind")
    if kind == "Deployment":
        labels = dig(doc, "spec", "template", "metadata", "labels") or {}
        selector = dig(doc, "spec", "selector", "matchLabels") or {}
        if not selector or any(labels.get(k) != v for k, v in selector.items()):
            problems.append("spec.selector.matchLabels does not match the pod labels")
        containers = dig(doc, "spec", "template", "spec", "containers") or []
        if not containers:
            problems.append("no containers")
        for container in containers:
            for field in ("name", "image"):
                if not container.get(field):
                    problems.append(f"container missing {field}")
            if dig(container, "readinessProbe", "httpGet", "path") != "/readyz":
                problems.append(f"container {container.get('name')} has no readiness probe on /readyz")
        if dig(doc, "spec", "template", "spec", "securityContext", "runAsNonRoot") is not True:
            problems.append("pods must run as non-root")
    elif kind == "Service":
        if not dig(doc, "spec", "selector") or not dig(doc, "spec", "ports"):
            problems.append("a Service needs a selector and ports")
    elif kind == "PodDisruptionBudget":
        if not dig(doc, "spec", "selector", "matchLabels"):
            problems.append("a PodDisruptionBudget needs a selector")
        if dig(doc, "spec", "minAvailable") is None and dig(doc, "spec", "maxUnavailable") is None:
            problems.append("a PodDisruptionBudget needs minAvailable or maxUnavailable")
    elif kind == "ConfigMap":
        text = dig(doc, "data", "toold.toml")
        if not text:
            problems.append("ConfigMap has no toold.toml")
        else:
            try:
                settings = tomllib.loads(text)
            except tomllib.TOMLDecodeError as err:
                problems.append(f"toold.toml does not parse: {err}")
            else:
                # The daemon refuses unknown settings: every one must be documented in
                # config/toold.toml.
                known = tomllib.loads((ROOT / "config" / "toold.toml").read_text())
                for section, values in settings.items():
                    for key in values:
                        if key not in known.get(section, {}):
                            problems.append(f"toold.toml sets unknown setting {section}.{key}")
    elif kind == "Secret":
        if not (doc.get("stringData") or doc.get("data")):
            problems.append("a Secret needs data")
    return problems


def check_cluster(docs):
    """Problems across objects: the Secret keys and ConfigMap the Deployment reads exist, and
    the Service and PodDisruptionBudget select the Deployment's pods."""
    problems = []
    by_kind = {}
    for doc in docs:
        by_kind.setdefault(doc.get("kind"), []).append(doc)
    for kind in ("Deployment", "Service", "ConfigMap", "Secret", "PodDisruptionBudget"):
        if kind not in by_kind:
            problems.append(f"no {kind}")
    secrets = {dig(s, "metadata", "name"): set((s.get("stringData") or s.get("data") or {})) for s in by_kind.get("Secret", [])}
    configs = {dig(c, "metadata", "name") for c in by_kind.get("ConfigMap", [])}
    for deployment in by_kind.get("Deployment", []):
        labels = dig(deployment, "spec", "template", "metadata", "labels") or {}
        pod = dig(deployment, "spec", "template", "spec") or {}
        for container in pod.get("containers", []):
            for env in container.get("env", []):
                ref = dig(env, "valueFrom", "secretKeyRef")
                if ref and ref.get("key") not in secrets.get(ref.get("name"), set()):
                    problems.append(f"env {env.get('name')} reads a missing Secret key {ref}")
        for volume in pod.get("volumes", []):
            name = dig(volume, "configMap", "name")
            if name and name not in configs:
                problems.append(f"volume reads a missing ConfigMap {name}")
        for other in by_kind.get("Service", []) + by_kind.get("PodDisruptionBudget", []):
            selector = dig(other, "spec", "selector", "matchLabels") or dig(other, "spec", "selector") or {}
            if any(labels.get(k) != v for k, v in selector.items()):
                problems.append(f"{other.get('kind')} selector does not match the pods")
    return problems


def check_compose(doc):
    problems = []
    services = doc.get("services") or {}
    for name in ("toold", "postgres"):
        if name not in services:
            problems.append(f"compose has no {name} service")
    url = str(dig(services, "toold", "environment", "TOOLD_DATABASE_URL") or "")
    if not url.startswith("postgres://"):
        problems.append("toold's TOOLD_DATABASE_URL is not a postgres:// URL")
    if "postgres" not in (dig(services, "toold", "depends_on") or {}):
        problems.append("toold does not depend on postgres")
    return problems


def check_unit(text):
    problems = []
    for needed in ("[Unit]", "[Service]", "[Install]", "ExecStart=/usr/local/bin/toold serve", "User="):
        if needed not in text:
            problems.append(f"systemd unit lacks {needed}")
    return problems


def check_dockerfile(text):
    problems = []
    if sum(line.startswith("FROM ") for line in text.splitlines()) < 2:
        problems.append("the Dockerfile is not multi-stage")
    for needed in ("bubblewrap", "COPY migrations", "COPY config/toold.toml", "USER toold"):
        if needed not in text:
            problems.append(f"the Dockerfile lacks {needed}")
    return problems


def self_check(kube_docs):
    """Broken copies must be reported, or the checks above could not fail."""
    broken = copy.deepcopy(kube_docs)
    for doc in broken:
        if doc.get("kind") == "Deployment":
            doc["spec"]["template"]["spec"]["containers"][0].pop("readinessProbe", None)
            doc["spec"]["template"]["spec"]["containers"][0]["env"].append(
                {"name": "X", "valueFrom": {"secretKeyRef": {"name": "toold-secrets", "key": "nope"}}})
    found = [p for doc in broken for p in check_object(doc)] + check_cluster(broken)
    missing = [] if len(found) >= 2 else ["the self-check's broken Deployment was not caught"]
    bad_config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                  "data": {"toold.toml": "[server]\nno_such_setting = 1\n"}}
    if not check_object(bad_config):
        missing.append("an unknown setting in the ConfigMap was not caught")
    if not check_object({"kind": "Service"}):
        missing.append("an object without apiVersion and name was not caught")
    if not check_dockerfile("FROM x\nUSER root\n"):
        missing.append("a single-stage root Dockerfile was not caught")
    return missing


def main():
    results = []
    kube_docs = []
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        except yaml.YAMLError as err:
            results.append((path.name, [f"does not parse: {err}"]))
            continue
        kube_docs.extend(docs)
        results.append((path.name, [p for d in docs for p in check_object(d)]))
    results.append(("kubernetes (together)", check_cluster(kube_docs)))
    results.append(("docker-compose.yml", check_compose(yaml.safe_load((DEPLOY / "docker-compose.yml").read_text()))))
    results.append(("systemd/toold.service", check_unit((DEPLOY / "systemd" / "toold.service").read_text())))
    results.append(("Dockerfile", check_dockerfile((ROOT / "Dockerfile").read_text())))
    results.append(("self-check", self_check(kube_docs)))
    failed = 0
    for name, problems in results:
        status = "ok" if not problems else "FAILED"
        print(f"manifest {name} ... {status}")
        for problem in problems:
            print(f"    {problem}")
        failed += bool(problems)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
