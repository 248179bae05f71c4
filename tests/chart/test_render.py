"""The chart renders valid, secure manifests whose webhook and certificates match the code.

RBAC is checked against what the code calls in `test_rbac_matches_code.py`.
"""

from __future__ import annotations

import argparse
import base64
import importlib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store

from certs.controller import settings_from_env
from scheduler.api.config import SchedulerConfiguration
from scheduler.cluster.kube.process import EXIT_SECONDS
from tests.chart.conftest import CHART, NAMESPACE, Helm
from webhook.app import create_app
from webhook.rules.lookups import MemoryLookups

VALUE_SETS = [None, *sorted(p.name for p in (CHART / "ci").glob("*-values.yaml"))]
KUBERNETES_VERSIONS = ["1.30.0", "1.37.0"]
# Kinds of other projects' CRDs (cert-manager, Prometheus Operator): kubernetes-validate has no schema for them.
FOREIGN_KINDS = {"Certificate", "Issuer", "ServiceMonitor"}
Doc = dict[str, Any]


@pytest.fixture(scope="session")
def rendered(helm: Helm) -> dict[str | None, list[Doc]]:
    return {values: helm.template(values) for values in VALUE_SETS}


def _of_kind(docs: list[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind]


def _one(docs: list[Doc], kind: str, name_suffix: str = "") -> Doc:
    found = [d for d in _of_kind(docs, kind) if d["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"expected one {kind} named *{name_suffix}, found {len(found)}"
    return found[0]


def _pod_specs(docs: list[Doc]) -> list[tuple[str, Doc]]:
    return [
        (f"{d['kind']}/{d['metadata']['name']}", d["spec"]["template"]["spec"])
        for d in docs
        if d["kind"] in ("Deployment", "Job")
    ]


def _env(container: Doc) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


@pytest.mark.parametrize("values", VALUE_SETS)
def test_helm_lint_strict(helm: Helm, values: str | None) -> None:
    args = ["lint", "--strict", str(CHART)]
    if values:
        args += ["--values", str(CHART / "ci" / values)]
    done = helm.run(*args)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("values", VALUE_SETS)
def test_every_manifest_validates_against_kubernetes(
    rendered: dict[str | None, list[Doc]], values: str | None, version: str
) -> None:
    checked = 0
    for doc in rendered[values]:
        if doc["kind"] in FOREIGN_KINDS:
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']} on {version}: {err.message} at {err.path}")
        checked += 1
    assert checked >= 20


def test_values_outside_the_schema_are_refused(helm: Helm) -> None:
    for bad, want in [
        ("certificates.mode=vault", "certificates.mode must be one of"),
        ("webhook.failurePolicy.pods=Retry", "webhook.failurePolicy.pods must be one of"),
        ("webhook.timeoutSeconds=60", "webhook.timeoutSeconds"),
        ("scheduler.minRuntime.preempt=ten minutes", "scheduler.minRuntime.preempt"),
        ("webhook.replicaz=3", "Additional property replicaz is not allowed"),
        ("scheduler.terminationGracePeriodSeconds=5", "scheduler.terminationGracePeriodSeconds"),
        ("webhook.terminationGracePeriodSeconds=2", "webhook.terminationGracePeriodSeconds"),
    ]:
        done = helm.run("template", "phalanx", str(CHART), "--set", bad)
        assert done.returncode != 0 and want in done.stderr, (bad, done.stderr)


@pytest.mark.parametrize(
    "image",
    [
        pytest.param([], id="the default values"),
        pytest.param(["--set", "image.repository=ghcr.io/phalanx-dev/phalanx"], id="the former, unpublished default"),
    ],
)
def test_an_image_nobody_built_is_refused_with_how_to_build_one(helm: Helm, image: list[str]) -> None:
    """No Phalanx image is published: the chart renders only once told which image was built from the Dockerfile."""
    done = helm.run("template", "phalanx", str(CHART), "--namespace", NAMESPACE, *image)
    assert done.returncode != 0, "rendered with an image nobody publishes"
    assert "image.repository is required" in done.stderr and "Dockerfile" in done.stderr, done.stderr
    assert "--set image.repository=" in done.stderr, done.stderr


@pytest.mark.parametrize("values", VALUE_SETS)
def test_pods_run_locked_down_with_requests(rendered: dict[str | None, list[Doc]], values: str | None) -> None:
    specs = _pod_specs(rendered[values])
    assert specs
    for name, spec in specs:
        pod_sc = spec["securityContext"]
        assert pod_sc["runAsNonRoot"] is True, name
        assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc["readOnlyRootFilesystem"] is True, name
            assert sc["capabilities"]["drop"] == ["ALL"], name
            assert sc["runAsNonRoot"] is True, name
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, name
            assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"], name


STOP_BOUNDS = {"-scheduler": EXIT_SECONDS, "-webhook": 5.0}
"""Seconds from SIGTERM to exit, at the latest (issue 24): the scheduler's own deadline, and the webhook's bound
(gunicorn's graceful timeout, `webhook.server.STOP_SECONDS`, is 3 s of it)."""
STOP_MARGIN = 5.0


@pytest.mark.parametrize("values", VALUE_SETS)
def test_sigkill_comes_after_the_processes_stop_with_a_margin(
    rendered: dict[str | None, list[Doc]], values: str | None
) -> None:
    for suffix, bound in STOP_BOUNDS.items():
        spec = _one(rendered[values], "Deployment", suffix)["spec"]["template"]["spec"]
        # the grace period runs from the deletion: a preStop sleep spends it before SIGTERM is sent
        hook = ((spec["containers"][0].get("lifecycle") or {}).get("preStop") or {}).get("sleep") or {}
        pre_stop = float(hook.get("seconds", 0))
        assert spec["terminationGracePeriodSeconds"] >= pre_stop + bound + STOP_MARGIN, suffix


@pytest.mark.parametrize("values", VALUE_SETS)
def test_webhook_is_highly_available(rendered: dict[str | None, list[Doc]], values: str | None) -> None:
    docs = rendered[values]
    deploy = _one(docs, "Deployment", "-webhook")
    assert deploy["spec"]["replicas"] >= 2
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    pdb = _one(docs, "PodDisruptionBudget", "-webhook")
    assert pdb["spec"]["selector"]["matchLabels"] == deploy["spec"]["selector"]["matchLabels"]
    anti = deploy["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    term = anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["labelSelector"]["matchLabels"] == deploy["spec"]["selector"]["matchLabels"]


def test_webhook_paths_are_the_paths_the_webhook_serves(rendered: dict[str | None, list[Doc]]) -> None:
    app = create_app(MemoryLookups())
    served = {rule.rule for rule in app.url_map.iter_rules() if "POST" in (rule.methods or set())}
    for values, docs in rendered.items():
        service = _one(docs, "Service", "-webhook")
        for kind, want_path in (
            ("MutatingWebhookConfiguration", "/mutate"),
            ("ValidatingWebhookConfiguration", "/validate"),
        ):
            for hook in _one(docs, kind)["webhooks"]:
                ref = hook["clientConfig"]["service"]
                assert ref["path"] == want_path and ref["path"] in served, (values, hook["name"])
                assert (ref["name"], ref["namespace"], ref["port"]) == (service["metadata"]["name"], NAMESPACE, 443)


@pytest.mark.parametrize("values", VALUE_SETS)
def test_webhook_configurations_follow_the_admission_contract(
    rendered: dict[str | None, list[Doc]], values: str | None
) -> None:
    docs = rendered[values]
    chart_values = yaml.safe_load((CHART / "values.yaml").read_text())
    if values:
        overrides = yaml.safe_load((CHART / "ci" / values).read_text())
        chart_values["webhook"]["failurePolicy"].update(overrides.get("webhook", {}).get("failurePolicy", {}))
    policy_key = {"pods": "pods", "podgroups": "podGroups", "workloads": "workloads", "queues": "queues"}
    policy_key["priorityclasses"] = "priorityClasses"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in _one(docs, kind)["webhooks"]:
            assert hook["sideEffects"] == "None"
            assert hook["admissionReviewVersions"] == ["v1"]
            assert hook["timeoutSeconds"] == 5
            excluded = hook["namespaceSelector"]["matchExpressions"][0]
            assert excluded["key"] == "kubernetes.io/metadata.name" and excluded["operator"] == "NotIn"
            assert {"kube-system", NAMESPACE} <= set(excluded["values"])
            resources = {r for rule in hook["rules"] for r in rule["resources"]}
            assert len(resources) == 1, "one resource per webhook, so each has its own failurePolicy"
            (resource,) = resources
            assert hook["failurePolicy"] == chart_values["webhook"]["failurePolicy"][policy_key[resource]]
            if resource == "pods":
                (condition,) = hook["matchConditions"]
                assert "'scheduling.phalanx.dev/pod-group' in object.metadata.labels" in condition["expression"]
            else:
                assert "matchConditions" not in hook


def test_default_failure_policies(rendered: dict[str | None, list[Doc]]) -> None:
    hooks = _one(rendered[None], "ValidatingWebhookConfiguration")["webhooks"]
    policies = {h["rules"][0]["resources"][0]: h["failurePolicy"] for h in hooks}
    assert policies == {
        "pods": "Fail",
        "podgroups": "Fail",
        "workloads": "Fail",
        "queues": "Fail",
        "priorityclasses": "Ignore",
    }


def test_self_managed_env_is_what_the_certificate_controller_reads(rendered: dict[str | None, list[Doc]]) -> None:
    container = _one(rendered[None], "Deployment", "-webhook")["spec"]["template"]["spec"]["containers"][0]
    settings = settings_from_env(_env(container), cert_file=Path("/certs/tls.crt"), key_file=Path("/certs/tls.key"))

    assert settings is not None
    assert settings.namespace == NAMESPACE
    assert settings.service == _one(rendered[None], "Service", "-webhook")["metadata"]["name"]
    assert (
        settings.mutating_webhook_configuration
        == _one(rendered[None], "MutatingWebhookConfiguration")["metadata"]["name"]
    )
    assert (
        settings.validating_webhook_configuration
        == _one(rendered[None], "ValidatingWebhookConfiguration")["metadata"]["name"]
    )
    assert (settings.secret_name, settings.key_type, settings.days) == ("phalanx-webhook-tls", "ecdsa", 365)
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["certs"]["mountPath"] == "/certs" and mounts["certs"]["readOnly"] is False
    assert not _of_kind(rendered[None], "Secret"), "the webhook creates its Secret; Helm must not own it"


def test_helm_mode_secret_and_ca_bundle_form_a_valid_chain(rendered: dict[str | None, list[Doc]]) -> None:
    docs = rendered["helm-certs-values.yaml"]
    secret = _one(docs, "Secret", "-webhook-tls")
    ca_pem = base64.b64decode(secret["data"]["ca.crt"])
    leaf = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    verifier = (
        PolicyBuilder()
        .store(Store([x509.load_pem_x509_certificate(ca_pem)]))
        .build_server_verifier(x509.DNSName(f"phalanx-webhook.{NAMESPACE}.svc"))
    )
    verifier.verify(leaf, [])
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in _one(docs, kind)["webhooks"]:
            assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca_pem
    deploy = _one(docs, "Deployment", "-webhook")
    volumes = {v["name"]: v for v in deploy["spec"]["template"]["spec"]["volumes"]}
    assert volumes["certs"]["secret"]["secretName"] == secret["metadata"]["name"]
    assert "PHALANX_CERT_MODE" not in _env(deploy["spec"]["template"]["spec"]["containers"][0])


def test_cert_manager_mode_issues_a_certificate_and_injects_its_ca(rendered: dict[str | None, list[Doc]]) -> None:
    docs = rendered["cert-manager-values.yaml"]
    certificate = _one(docs, "Certificate")
    assert certificate["spec"]["secretName"] == "phalanx-webhook-tls"
    assert f"phalanx-webhook.{NAMESPACE}.svc" in certificate["spec"]["dnsNames"]
    assert certificate["spec"]["issuerRef"] == {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    assert not _of_kind(docs, "Issuer"), "an existing issuer is used as given"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        config = _one(docs, kind)
        assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/phalanx-webhook"
        assert all("caBundle" not in h["clientConfig"] for h in config["webhooks"])
    assert _one(docs, "ServiceMonitor")["metadata"]["labels"]["release"] == "prometheus"


@pytest.mark.parametrize("values", [None, "cert-manager-values.yaml", "helm-certs-values.yaml"])
def test_the_apiservice_reaches_the_schedulers_explain_api_by_a_name_its_certificate_carries(
    rendered: dict[str | None, list[Doc]], values: str | None
) -> None:
    """kube-apiserver sends the explain API's requests to the APIService's Service, on to the scheduler's port, and
    verifies the certificate it serves (the webhook's Secret, mounted) for `<service>.<namespace>.svc` against the
    APIService's caBundle, in each certificate mode."""
    docs = rendered[values]
    api_service = _one(docs, "APIService")
    assert api_service["metadata"]["name"] == "v1alpha1.explain.phalanx.dev"
    assert (api_service["spec"]["group"], api_service["spec"]["version"]) == ("explain.phalanx.dev", "v1alpha1")
    service = _one(docs, "Service", "-scheduler")
    ref = api_service["spec"]["service"]
    assert (ref["name"], ref["namespace"]) == (service["metadata"]["name"], NAMESPACE)
    (port,) = [p for p in service["spec"]["ports"] if p["port"] == ref["port"]]
    deploy = _one(docs, "Deployment", "-scheduler")
    assert service["spec"]["selector"].items() <= deploy["spec"]["template"]["metadata"]["labels"].items()
    pod = deploy["spec"]["template"]["spec"]
    container = pod["containers"][0]
    (served,) = [p for p in container["ports"] if p["name"] == port["targetPort"]]
    args = dict(a[2:].split("=", 1) for a in container["args"] if a.startswith("--") and "=" in a)
    assert args["explain-bind"] == f"0.0.0.0:{served['containerPort']}"
    mount = next(m for m in container["volumeMounts"] if m["name"] == "certs")
    assert (args["tls-cert-file"], args["tls-private-key-file"]) == (
        f"{mount['mountPath']}/tls.crt",
        f"{mount['mountPath']}/tls.key",
    )
    volume = next(v for v in pod["volumes"] if v["name"] == "certs")
    assert volume["secret"]["secretName"] == "phalanx-webhook-tls"
    assert {i["key"] for i in volume["secret"]["items"]} == {"tls.crt", "tls.key"}, "never the CA's key"
    name = f"{service['metadata']['name']}.{NAMESPACE}.svc"
    if values is None:
        webhook = _one(docs, "Deployment", "-webhook")["spec"]["template"]["spec"]["containers"][0]
        settings = settings_from_env(_env(webhook), cert_file=Path("/certs/tls.crt"), key_file=Path("/certs/tls.key"))
        assert settings is not None and name in settings.extra_sans
        assert settings.api_service == api_service["metadata"]["name"], "the controller injects its caBundle"
    elif values == "cert-manager-values.yaml":
        assert name in _one(docs, "Certificate")["spec"]["dnsNames"]
        assert (
            api_service["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/phalanx-webhook"
        )
    else:
        secret = _one(docs, "Secret", "-webhook-tls")
        ca_pem = base64.b64decode(secret["data"]["ca.crt"])
        assert base64.b64decode(api_service["spec"]["caBundle"]) == ca_pem
        leaf = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
        store = Store([x509.load_pem_x509_certificate(ca_pem)])
        PolicyBuilder().store(store).build_server_verifier(x509.DNSName(name)).verify(leaf, [])


def test_without_the_explain_api_nothing_of_it_is_rendered(rendered: dict[str | None, list[Doc]]) -> None:
    docs = rendered["no-explain-api-values.yaml"]
    assert not _of_kind(docs, "APIService")
    assert [d["metadata"]["name"] for d in _of_kind(docs, "Service") if "scheduler" in d["metadata"]["name"]] == [
        "phalanx-scheduler-metrics"
    ]
    container = _one(docs, "Deployment", "-scheduler")["spec"]["template"]["spec"]["containers"][0]
    assert not [a for a in container["args"] if a.startswith(("--explain", "--tls"))]
    webhook = _one(docs, "Deployment", "-webhook")["spec"]["template"]["spec"]["containers"][0]
    assert "PHALANX_CERT_API_SERVICE" not in _env(webhook)


@pytest.mark.parametrize(
    ("values", "want"),
    [
        pytest.param(
            None,
            {"schedulerName": "phalanx-scheduler", "gate": "scheduling.phalanx.dev/gang", "preempt": "0s"},
            id="defaults",
        ),
        pytest.param(
            "production-values.yaml",
            {"schedulerName": "gang-scheduler", "gate": "example.com/gang", "preempt": "10m"},
            id="production overrides",
        ),
    ],
)
def test_scheduler_configuration_parses_into_the_model(
    rendered: dict[str | None, list[Doc]], values: str | None, want: dict[str, str]
) -> None:
    docs = rendered[values]
    config = SchedulerConfiguration.model_validate(
        yaml.safe_load(_one(docs, "ConfigMap", "-scheduler")["data"]["config.yaml"])
    )
    assert config.model_extra == {}, "every rendered key is a field of SchedulerConfiguration"
    assert (config.scheduler_name, config.gate_name, config.min_runtime.preempt) == (
        want["schedulerName"],
        want["gate"],
        want["preempt"],
    )
    assert config.leader_election.leader_elect is True
    assert config.leader_election.resource_name == "phalanx-scheduler"
    assert config.leader_election.resource_namespace == NAMESPACE
    webhook_args = _one(docs, "Deployment", "-webhook")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--scheduler-name={config.scheduler_name}" in webhook_args
    assert f"--gate-name={config.gate_name}" in webhook_args


@pytest.mark.parametrize("values", VALUE_SETS)
def test_container_args_parse_with_the_phalanx_cli(rendered: dict[str | None, list[Doc]], values: str | None) -> None:
    """Each container's args are accepted by the subcommand it runs (the image's entrypoint is `phalanx`)."""
    for name, spec in _pod_specs(rendered[values]):
        for container in spec["containers"]:
            args = container["args"]
            try:
                module = importlib.import_module(f"phalanx.commands.{args[0]}")
            except ModuleNotFoundError:
                continue  # that subcommand is not written yet
            parser = argparse.ArgumentParser(prog="phalanx", exit_on_error=False)
            module.register(parser.add_subparsers(dest="command"))
            try:
                parser.parse_args(args)
            except (argparse.ArgumentError, SystemExit) as err:
                pytest.fail(f"{name}: phalanx {' '.join(args)}: {err}")


@pytest.mark.parametrize(("extra", "want_aggregated"), [([], True), (["--set", "viewer.aggregateToView=false"], False)])
def test_the_viewer_role_reads_only_and_joins_view(helm: Helm, extra: list[str], want_aggregated: bool) -> None:
    """`kubectl phalanx` needs <release>-phalanx-viewer: get and list only, aggregated into `view` unless told not;
    with the explain API, only the API's resources; without it, the reads and the scheduler's own ConfigMap."""
    (viewer,) = [d for d in helm.template(None, *extra) if d["metadata"]["name"] == "phalanx-viewer"]
    assert viewer["kind"] == "ClusterRole"
    labels = viewer["metadata"]["labels"]
    assert (labels.get("rbac.authorization.k8s.io/aggregate-to-view") == "true") is want_aggregated
    assert {verb for rule in viewer["rules"] for verb in rule["verbs"]} == {"get", "list"}
    assert {group for rule in viewer["rules"] for group in rule["apiGroups"]} == {"explain.phalanx.dev"}
    local = helm.template("no-explain-api-values.yaml", *extra)
    (viewer,) = [d for d in local if d["metadata"]["name"] == "phalanx-viewer"]
    assert {verb for rule in viewer["rules"] for verb in rule["verbs"]} == {"get", "list"}
    config_map = next(r for r in viewer["rules"] if "configmaps" in r["resources"])
    assert config_map["resourceNames"] == ["phalanx-scheduler"], "only the scheduler's own configuration"
