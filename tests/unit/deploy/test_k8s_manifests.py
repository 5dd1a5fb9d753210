"""``deploy/k8s`` and the ``Dockerfile``: rendered, schema-checked and cross-checked without a cluster.

The schema (``k8s_schema.py``) is the subset of the Kubernetes API the manifests use, with every object
closed, so a misspelt field fails here instead of being silently dropped by ``kubectl apply``.
"""

from __future__ import annotations

import copy
import re
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from k8s_schema import SCHEMAS, api_server_rules, quantity

REPO = Path(__file__).resolve().parents[3]
K8S = REPO / "deploy" / "k8s"
# The capabilities the jail's system calls need (deploy/k8s/README.md explains each); nothing more.
NEEDED_CAPABILITIES = {
    "SYS_ADMIN",
    "SETUID",
    "SETGID",
    "SETPCAP",
    "KILL",
    "SYS_RESOURCE",
    "CHOWN",
    "FOWNER",
    "DAC_OVERRIDE",
}


def documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(K8S.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None)
    return docs


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in documents() if d["kind"] == kind]


def sandbox_container() -> dict[str, Any]:
    (deployment,) = of_kind("Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def problems(doc: dict[str, Any]) -> list[str]:
    """Every schema violation and API-server rule broken by ``doc`` (empty: the API server accepts it)."""
    validator = jsonschema.Draft202012Validator(SCHEMAS[doc["kind"]])
    found = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]
    if doc["kind"] == "Deployment":
        for container in doc["spec"]["template"]["spec"]["containers"]:
            found += api_server_rules(container)
    return found


def test_every_manifest_passes_the_schema_and_the_api_server_rules() -> None:
    docs = documents()
    assert sorted(d["kind"] for d in docs) == ["Deployment", "NetworkPolicy", "Service", "Service"]
    for doc in docs:
        assert problems(doc) == [], doc["metadata"]["name"]


def test_the_checks_catch_a_misspelt_field_and_a_refused_security_context() -> None:
    """Regression (issue 24, class 7): the rule here refused allowPrivilegeEscalation: false with the
    manifest's "SYS_ADMIN", which the API server accepts (it compares the literal "CAP_SYS_ADMIN")."""
    (deployment,) = of_kind("Deployment")
    typo = copy.deepcopy(deployment)
    container = typo["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    assert any("readinesProbe" in p for p in problems(typo))
    refused = copy.deepcopy(deployment)
    context = refused["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    context["allowPrivilegeEscalation"] = False
    assert problems(refused) == []  # "SYS_ADMIN" unprefixed: accepted
    context["capabilities"]["add"] = ["CAP_SYS_ADMIN"]
    assert any("CAP_SYS_ADMIN" in p for p in problems(refused))
    context["capabilities"]["add"], context["privileged"] = ["SYS_ADMIN"], True
    assert any("privileged" in p for p in problems(refused))


def test_the_readme_states_the_manifests_privilege_escalation() -> None:
    """The README's table row for allowPrivilegeEscalation gives the manifest's value (it said `true`,
    "forced", while false is accepted and is what the manifest now sets)."""
    value = sandbox_container()["securityContext"]["allowPrivilegeEscalation"]
    assert value is False
    readme = (K8S / "README.md").read_text(encoding="utf-8")
    (row,) = [line for line in readme.splitlines() if line.startswith("| `allowPrivilegeEscalation` |")]
    assert row.split("|")[2].strip() == f"`{str(value).lower()}`"


def test_selectors_and_ports_connect_services_to_the_pods() -> None:
    (deployment,) = of_kind("Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    port_names = {p["name"]: p["containerPort"] for p in sandbox_container()["ports"]}
    services = of_kind("Service")
    assert services
    for service in services:
        assert service["spec"]["selector"].items() <= pod_labels.items()
        assert service["spec"].get("type", "ClusterIP") == "ClusterIP"  # no authentication: never exposed
        assert service["spec"]["ports"], service["metadata"]["name"]
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in port_names or port["targetPort"] in port_names.values()
    (policy,) = of_kind("NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()


def test_probes_ping_the_service_on_its_port() -> None:
    container = sandbox_container()
    ports = {p["name"] for p in container["ports"]} | {p["containerPort"] for p in container["ports"]}
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/v1/ping"
        assert container[probe]["httpGet"]["port"] in ports


def test_container_command_is_a_valid_serve_invocation_on_the_container_port() -> None:
    from execrl.cli import build_parser
    from execrl.sandbox.cli import _serve_handler

    container = sandbox_container()
    args = build_parser().parse_args(container["args"][1:])
    assert container["args"][0] == "execrl"
    assert args.func is _serve_handler
    assert args.host == "0.0.0.0"
    assert args.port == container["ports"][0]["containerPort"]
    # The memory limit covers every worker at the service's per-execution default, plus the service.
    memory_limit = quantity(container["resources"]["limits"]["memory"])
    assert memory_limit >= args.workers * args.default_memory_mb * 2**20 + 2**29


def test_security_context_is_the_stated_minimum() -> None:
    context = sandbox_container()["securityContext"]
    assert context["privileged"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    assert set(context["capabilities"]["add"]) == NEEDED_CAPABILITIES
    readme = (K8S / "README.md").read_text(encoding="utf-8")
    for capability in NEEDED_CAPABILITIES:
        assert f"`{capability}`" in readme, (
            f"{capability} is granted but not explained in deploy/k8s/README.md"
        )


def _dockerfile_instructions() -> list[tuple[str, str]]:
    text = (REPO / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def test_dockerfile_has_a_slim_python_base_and_every_registered_toolchain() -> None:
    from execrl.sandbox.langs.registry import get_language, list_languages

    instructions = _dockerfile_instructions()
    (base,) = [value for op, value in instructions if op == "FROM"]
    # Pinned to a patch release and Debian suite (issue 24, class 7): an unpinned python:3.11-slim moved
    # to new Pythons and Debian suites under the same Dockerfile.
    assert re.fullmatch(r"python:3\.1[1-9]\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?", base), base
    installed = " ".join(value for op, value in instructions if op == "RUN")
    assert list_languages()
    for name in list_languages():
        language = get_language(name)
        if language.mode == "binary":  # a toolchain the image must carry (python is the base image's own)
            package = language.package
            assert re.search(rf"apt-get install .*(?<!\S){re.escape(package)}(?!\S)", installed), package
    assert "torch" not in installed


def test_dockerfile_runs_the_same_command_as_the_deployment() -> None:
    instructions = dict(_dockerfile_instructions())
    assert yaml.safe_load(instructions["CMD"]) == sandbox_container()["args"]
    entrypoint = yaml.safe_load(instructions["ENTRYPOINT"])
    assert entrypoint == ["/usr/local/bin/sandbox-entrypoint"]
    script = (REPO / "deploy" / "sandbox-entrypoint.sh").read_text(encoding="utf-8")
    assert script.rstrip().endswith('exec "$@"')
    assert shlex.split(instructions["USER"]) == ["0:0"]


@pytest.mark.parametrize(
    ("text", "expected"), [("500m", 0.5), ("4", 4.0), ("6Gi", 6 * 2**30), ("64Mi", 64 * 2**20)]
)
def test_quantities_are_read_in_base_units(text: str, expected: float) -> None:
    assert quantity(text) == expected
