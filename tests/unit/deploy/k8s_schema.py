"""The part of the Kubernetes API schema that ``deploy/k8s`` uses, as JSON Schema, plus the API server's
cross-field rules that a schema cannot express. No cluster and no ``kubeconform`` needed (neither is
available offline); ``additionalProperties: false`` everywhere makes a misspelt field an error."""

from __future__ import annotations

import re
from typing import Any

_STR = {"type": "string"}
_INT = {"type": "integer"}
_BOOL = {"type": "boolean"}
_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
_QUANTITY = {
    "anyOf": [{"type": "string", "pattern": r"^[0-9.]+(m|Ki|Mi|Gi|Ti|k|M|G)?$"}, {"type": "integer"}]
}
_PORT_REF = {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 65535}, {"type": "string"}]}


def _obj(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


_METADATA = _obj({"name": _STR, "labels": _LABELS, "annotations": _LABELS}, ("name",))
_SELECTOR = _obj({"matchLabels": _LABELS}, ("matchLabels",))
_PROBE = _obj(
    {
        "httpGet": _obj({"path": _STR, "port": _PORT_REF, "scheme": {"enum": ["HTTP", "HTTPS"]}}, ("port",)),
        "initialDelaySeconds": _INT,
        "periodSeconds": _INT,
        "timeoutSeconds": _INT,
        "failureThreshold": _INT,
        "successThreshold": _INT,
    }
)
_RESOURCES = _obj(
    {
        "requests": _obj({"cpu": _QUANTITY, "memory": _QUANTITY, "ephemeral-storage": _QUANTITY}),
        "limits": _obj({"cpu": _QUANTITY, "memory": _QUANTITY, "ephemeral-storage": _QUANTITY}),
    }
)
_PROFILE = _obj(
    {"type": {"enum": ["RuntimeDefault", "Unconfined", "Localhost"]}, "localhostProfile": _STR}, ("type",)
)
_SECURITY_CONTEXT = _obj(
    {
        "runAsUser": _INT,
        "runAsGroup": _INT,
        "runAsNonRoot": _BOOL,
        "privileged": _BOOL,
        "allowPrivilegeEscalation": _BOOL,
        "readOnlyRootFilesystem": _BOOL,
        "procMount": {"enum": ["Default", "Unmasked"]},
        "capabilities": _obj(
            {"add": {"type": "array", "items": _STR}, "drop": {"type": "array", "items": _STR}}
        ),
        "seccompProfile": _PROFILE,
        "appArmorProfile": _PROFILE,
    }
)
_CONTAINER = _obj(
    {
        "name": _STR,
        "image": _STR,
        "imagePullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
        "command": {"type": "array", "items": _STR},
        "args": {"type": "array", "items": _STR},
        "ports": {
            "type": "array",
            "items": _obj(
                {"name": _STR, "containerPort": _INT, "protocol": {"enum": ["TCP", "UDP", "SCTP"]}}
            ),
        },
        "readinessProbe": _PROBE,
        "livenessProbe": _PROBE,
        "startupProbe": _PROBE,
        "resources": _RESOURCES,
        "securityContext": _SECURITY_CONTEXT,
        "volumeMounts": {
            "type": "array",
            "items": _obj({"name": _STR, "mountPath": _STR, "readOnly": _BOOL}),
        },
    },
    ("name", "image"),
)
_POD_SPEC = _obj(
    {
        "automountServiceAccountToken": _BOOL,
        "enableServiceLinks": _BOOL,
        "hostUsers": _BOOL,
        "terminationGracePeriodSeconds": _INT,
        "topologySpreadConstraints": {
            "type": "array",
            "items": _obj(
                {
                    "maxSkew": _INT,
                    "topologyKey": _STR,
                    "whenUnsatisfiable": {"enum": ["DoNotSchedule", "ScheduleAnyway"]},
                    "labelSelector": _SELECTOR,
                },
                ("maxSkew", "topologyKey", "whenUnsatisfiable"),
            ),
        },
        "containers": {"type": "array", "minItems": 1, "items": _CONTAINER},
        "volumes": {
            "type": "array",
            "items": _obj(
                {
                    "name": _STR,
                    "emptyDir": _obj({"medium": {"enum": ["", "Memory"]}, "sizeLimit": _QUANTITY}),
                },
                ("name",),
            ),
        },
    },
    ("containers",),
)
DEPLOYMENT = _obj(
    {
        "apiVersion": {"const": "apps/v1"},
        "kind": {"const": "Deployment"},
        "metadata": _METADATA,
        "spec": _obj(
            {
                "replicas": {"type": "integer", "minimum": 0},
                "selector": _SELECTOR,
                "strategy": _obj(
                    {
                        "type": {"enum": ["RollingUpdate", "Recreate"]},
                        "rollingUpdate": _obj({"maxUnavailable": _PORT_REF, "maxSurge": _PORT_REF}),
                    }
                ),
                "template": _obj(
                    {"metadata": _obj({"labels": _LABELS}), "spec": _POD_SPEC}, ("metadata", "spec")
                ),
            },
            ("selector", "template"),
        ),
    },
    ("apiVersion", "kind", "metadata", "spec"),
)
_SERVICE_PORT = _obj(
    {"name": _STR, "port": _INT, "targetPort": _PORT_REF, "protocol": {"enum": ["TCP", "UDP", "SCTP"]}},
    ("port",),
)
SERVICE = _obj(
    {
        "apiVersion": {"const": "v1"},
        "kind": {"const": "Service"},
        "metadata": _METADATA,
        "spec": _obj(
            {
                "type": {"enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
                "clusterIP": _STR,
                "selector": _LABELS,
                "ports": {"type": "array", "minItems": 1, "items": _SERVICE_PORT},
            },
            ("selector", "ports"),
        ),
    },
    ("apiVersion", "kind", "metadata", "spec"),
)
_PEER = _obj({"podSelector": _SELECTOR})
NETWORK_POLICY = _obj(
    {
        "apiVersion": {"const": "networking.k8s.io/v1"},
        "kind": {"const": "NetworkPolicy"},
        "metadata": _METADATA,
        "spec": _obj(
            {
                "podSelector": _SELECTOR,
                "policyTypes": {"type": "array", "items": {"enum": ["Ingress", "Egress"]}},
                "ingress": {
                    "type": "array",
                    "items": _obj(
                        {
                            "from": {"type": "array", "items": _PEER},
                            "ports": {"type": "array", "items": _obj({"port": _PORT_REF, "protocol": _STR})},
                        }
                    ),
                },
                "egress": {"type": "array"},
            },
            ("podSelector",),
        ),
    },
    ("apiVersion", "kind", "metadata", "spec"),
)
SCHEMAS = {"Deployment": DEPLOYMENT, "Service": SERVICE, "NetworkPolicy": NETWORK_POLICY}

_UNITS = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(value: str | int) -> float:
    """A Kubernetes quantity in base units: ``"500m"`` -> 0.5, ``"6Gi"`` -> 6 * 2**30."""
    match = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(value))
    if match is None or match.group(2) not in _UNITS:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


def api_server_rules(container: dict[str, Any]) -> list[str]:
    """Cross-field rules the API server enforces on a container's securityContext (validation.go)."""
    context = container.get("securityContext", {})
    added = set(context.get("capabilities", {}).get("add", []))
    problems = []
    # validation.go (ValidateSecurityContext) compares the literal "CAP_SYS_ADMIN": the unprefixed
    # "SYS_ADMIN" that runtimes expect does not trigger it (the rule once encoded here said it did).
    if context.get("allowPrivilegeEscalation") is False and (
        context.get("privileged") or "CAP_SYS_ADMIN" in added
    ):
        problems.append(
            "allowPrivilegeEscalation: false is refused together with privileged or CAP_SYS_ADMIN"
        )
    if context.get("runAsNonRoot") is True and context.get("runAsUser") == 0:
        problems.append("runAsNonRoot: true contradicts runAsUser: 0")
    for kind in ("requests", "limits"):
        for value in container.get("resources", {}).get(kind, {}).values():
            quantity(value)  # raises ValueError naming a malformed quantity
    requests = container.get("resources", {}).get("requests", {})
    limits = container.get("resources", {}).get("limits", {})
    for name in set(requests) & set(limits):
        if quantity(requests[name]) > quantity(limits[name]):
            problems.append(
                f"resources.requests.{name} {requests[name]} exceeds limits.{name} {limits[name]}"
            )
    return problems
