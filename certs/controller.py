"""In-cluster certificate management: the Secret, `caBundle` and the files the webhook serves.

Each webhook replica runs one `CertificateController`; `phalanx webhook` builds its settings with
`settings_from_env` (the chart's `PHALANX_CERT_*` variables) and calls `start()` before serving.

A sync reads the Secret, applies at most one `certs.rotation` step per attempt and writes it back
with the resourceVersion it read; on 409 Conflict (or AlreadyExists when two replicas start
together) it re-reads and adopts what the other replica wrote. It then copies the Secret's CA
bundle into `caBundle` of every webhook of our two configurations (also undoing a `helm upgrade`
that re-applied them) and writes tls.crt/tls.key/ca.crt atomically into the directory gunicorn
reads them from (an emptyDir, the root filesystem being read-only): gunicorn's sync and gthread
workers build their SSL context per connection, so a renewed certificate is served without a
restart.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import structlog
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes import client

from certs.authority import KeyType
from certs.rotation import CertificatePolicy, CertificateState, next_deadline, next_step
from kube.errors import Conflict, NotFound, translated

log = structlog.get_logger(__name__)

Clock = Callable[[], dt.datetime]

BUNDLE_CHANGED_AT = "scheduling.phalanx.dev/ca-bundle-changed-at"
CERT_CHANGED_AT = "scheduling.phalanx.dev/serving-cert-changed-at"
_MAX_ATTEMPTS = 5


def system_clock() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True, slots=True)
class RotationSettings:
    """Where the certificate lives and what it must name; the chart passes these as env vars."""

    namespace: str
    secret_name: str
    service: str
    mutating_webhook_configuration: str
    validating_webhook_configuration: str
    cert_file: Path
    key_file: Path
    key_type: KeyType = "ecdsa"
    ca_days: float = 3650
    days: float = 365
    resync: dt.timedelta = dt.timedelta(minutes=1)
    extra_sans: tuple[str, ...] = ()
    owner: dict[str, Any] | None = None
    """`ownerReferences` entry for the Secret (this pod's ServiceAccount): removed with it at uninstall."""
    api_service: str = ""
    """An APIService served with this certificate too (the scheduler's explain API): its `caBundle` is kept with
    the webhook configurations'."""

    def __post_init__(self) -> None:
        # the files are swapped together through one `..data` link in their shared directory
        if self.key_file.parent != self.cert_file.parent:
            raise ValueError(
                f"key_file: Invalid value: {str(self.key_file)!r}: must be in the directory of cert_file "
                f"({self.cert_file.parent})"
            )
        if dt.timedelta(days=self.ca_days) < 6 * self.resync:
            raise ValueError(
                f"ca_days: Invalid value: {self.ca_days:g}: must last at least 6 resync periods "
                f"({6 * self.resync.total_seconds():g} s): a CA rotation takes 4"
            )

    @property
    def policy(self) -> CertificatePolicy:
        return CertificatePolicy(
            service=self.service,
            namespace=self.namespace,
            key_type=self.key_type,
            ca_days=self.ca_days,
            days=self.days,
            grace=2 * self.resync,
            extra_sans=self.extra_sans,
        )

    @property
    def ca_file(self) -> Path:
        return self.cert_file.parent / "ca.crt"


ENV_PREFIX = "PHALANX_CERT_"


def settings_from_env(environ: Mapping[str, str], *, cert_file: Path, key_file: Path) -> RotationSettings | None:
    """Read the chart's `PHALANX_CERT_*` variables; None unless PHALANX_CERT_MODE is self-managed.

    Variables: MODE, NAMESPACE, SECRET, SERVICE, MUTATING_WEBHOOK_CONFIGURATION,
    VALIDATING_WEBHOOK_CONFIGURATION, and optionally KEY_TYPE, CA_DAYS, DAYS, RESYNC_SECONDS, EXTRA_SANS
    (comma-separated IPs or host names the certificate must also carry) and API_SERVICE (an APIService whose
    caBundle is kept too).
    """
    if environ.get(f"{ENV_PREFIX}MODE") != "self-managed":
        return None

    def required(name: str) -> str:
        value = environ.get(ENV_PREFIX + name, "")
        if not value:
            raise ValueError(f"{ENV_PREFIX}{name}: Required value: needed when {ENV_PREFIX}MODE is self-managed")
        return value

    def number(name: str, default: float) -> float:
        raw = environ.get(ENV_PREFIX + name, str(default))
        try:
            value = float(raw)
        except ValueError:
            value = 0.0
        if not value > 0:
            raise ValueError(f"{ENV_PREFIX}{name}: Invalid value: {raw!r}: must be a positive number")
        return value

    key_type = environ.get(f"{ENV_PREFIX}KEY_TYPE", "ecdsa")
    if key_type not in ("ecdsa", "rsa"):
        raise ValueError(f"{ENV_PREFIX}KEY_TYPE: Unsupported value: {key_type!r}: supported values: ecdsa, rsa")
    return RotationSettings(
        namespace=required("NAMESPACE"),
        secret_name=required("SECRET"),
        service=required("SERVICE"),
        mutating_webhook_configuration=required("MUTATING_WEBHOOK_CONFIGURATION"),
        validating_webhook_configuration=required("VALIDATING_WEBHOOK_CONFIGURATION"),
        cert_file=cert_file,
        key_file=key_file,
        key_type="rsa" if key_type == "rsa" else "ecdsa",
        ca_days=number("CA_DAYS", 3650),
        days=number("DAYS", 365),
        resync=dt.timedelta(seconds=number("RESYNC_SECONDS", 60)),
        extra_sans=tuple(n.strip() for n in environ.get(f"{ENV_PREFIX}EXTRA_SANS", "").split(",") if n.strip()),
        api_service=environ.get(f"{ENV_PREFIX}API_SERVICE", ""),
    )


@dataclass(slots=True)
class CertificateController:
    """Keeps one replica's served certificate, the shared Secret and `caBundle` in step."""

    settings: RotationSettings
    api_client: client.ApiClient
    clock: Clock = system_clock
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sync(self) -> dt.datetime:
        """Make one pass; return when the next pass is due (never later than one resync)."""
        state = self._reconcile_secret()
        replaced_lately = self.clock() < state.bundle_changed_at + self.settings.policy.grace
        self._inject_ca_bundle(state.ca_bundle_pem, replaced_lately)
        self._write_files(state)
        now = self.clock()
        return min(next_deadline(state, self.settings.policy), now + self.settings.resync)

    def start(self) -> None:
        """Sync once in the caller (files exist before serving), then keep syncing in a thread."""
        first = self.sync()
        self._thread = threading.Thread(target=self._loop, args=(first,), name="cert-rotation", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop syncing; waits at most `timeout` for a sync under way (the thread is a daemon)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self, due: dt.datetime) -> None:
        while not self._stop.wait(max(0.0, (due - self.clock()).total_seconds())):
            try:
                due = self.sync()
            except Exception:
                # Keep serving the current files; the next pass retries (API outage, RBAC change).
                log.exception("certificate sync failed", secret=self._secret_ref)
                due = self.clock() + self.settings.resync

    @property
    def _secret_ref(self) -> str:
        return f"{self.settings.namespace}/{self.settings.secret_name}"

    def _reconcile_secret(self) -> CertificateState:
        core = client.CoreV1Api(self.api_client)
        policy = self.settings.policy
        for _ in range(_MAX_ATTEMPTS):
            secret = self._read_secret(core)
            state = _state_from_secret(secret) if secret is not None else None
            step = next_step(state, policy, self.clock())
            if step is None and state is not None:
                return state
            if step is None:
                raise AssertionError("next_step returns a step for a missing state")
            body = _secret_body(self.settings, step.state, secret)
            try:
                with translated():
                    if secret is None:
                        core.create_namespaced_secret(self.settings.namespace, body)
                    else:
                        core.replace_namespaced_secret(self.settings.secret_name, self.settings.namespace, body)
            except Conflict:  # a stale resourceVersion, or AlreadyExists when two replicas start together
                log.info("certificate secret changed by another replica", secret=self._secret_ref)
                continue
            log.info("certificate secret updated", secret=self._secret_ref, reason=step.reason)
            if next_step(step.state, policy, self.clock()) is None:
                return step.state
        raise RuntimeError(f"secret {self._secret_ref}: gave up after {_MAX_ATTEMPTS} conflicting updates")

    def _read_secret(self, core: client.CoreV1Api) -> client.V1Secret | None:
        try:
            with translated():
                return core.read_namespaced_secret(self.settings.secret_name, self.settings.namespace)
        except NotFound:
            return None

    def _inject_ca_bundle(self, bundle_pem: bytes, replaced_lately: bool) -> None:
        admission = client.AdmissionregistrationV1Api(self.api_client)
        wanted = partial(_trusted_bundle, bundle_pem, replaced_lately)
        mutating = self.settings.mutating_webhook_configuration
        validating = self.settings.validating_webhook_configuration
        for _ in range(_MAX_ATTEMPTS):
            try:
                with translated():
                    _set_ca_bundle(
                        mutating,
                        wanted,
                        lambda: admission.read_mutating_webhook_configuration(mutating),
                        lambda obj: admission.replace_mutating_webhook_configuration(mutating, obj),
                    )
                    _set_ca_bundle(
                        validating,
                        wanted,
                        lambda: admission.read_validating_webhook_configuration(validating),
                        lambda obj: admission.replace_validating_webhook_configuration(validating, obj),
                    )
                    if self.settings.api_service:
                        _set_api_service_ca_bundle(self.api_client, self.settings.api_service, wanted)
                return
            except Conflict:
                continue
        raise RuntimeError(f"caBundle: gave up after {_MAX_ATTEMPTS} conflicting updates")

    def _write_files(self, state: CertificateState) -> None:
        files = {
            self.settings.ca_file.name: state.ca_bundle_pem,
            self.settings.key_file.name: state.key_pem,
            self.settings.cert_file.name: state.cert_pem,
        }
        _publish(self.settings.cert_file.parent, files)


_WebhookConfiguration = TypeVar(
    "_WebhookConfiguration", client.V1MutatingWebhookConfiguration, client.V1ValidatingWebhookConfiguration
)


def _trusted_bundle(bundle_pem: bytes, replaced_lately: bool, current_b64: str | bytes | None) -> str:
    """caBundle for a webhook that trusts `current_b64` now: the Secret's bundle, base64.

    A Secret replaced whole (broken, or made for another Service) shares no CA with what the API server trusts,
    and the replicas serve the new certificate one resync after another. Until `grace` after the change
    (`replaced_lately`), the CAs trusted before stay beside the new ones, so every replica is verified whichever
    certificate it serves. A rotation always shares a CA between steps and needs no such overlap.
    """
    if replaced_lately and current_b64:
        try:
            trusted = x509.load_pem_x509_certificates(base64.b64decode(current_b64))
            new = x509.load_pem_x509_certificates(bundle_pem)
        except ValueError:
            trusted = []
        else:
            if trusted and not set(trusted) & set(new):
                bundle_pem += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in trusted)
    return base64.b64encode(bundle_pem).decode()


def _set_ca_bundle(
    name: str,
    wanted: Callable[[str | bytes | None], str],
    read: Callable[[], _WebhookConfiguration],
    write: Callable[[_WebhookConfiguration], object],
) -> None:
    """Point every webhook of one configuration at our CA bundle (`wanted`, given what it trusts now); a
    `Conflict` propagates to a retry."""
    try:
        with translated():
            obj = read()
    except NotFound:
        # Not created yet, or removed by the chart's pre-delete hook: nothing to inject into.
        log.warning("webhook configuration not found", name=name)
        return
    webhooks = obj.webhooks or []
    bundles = [wanted(w.client_config.ca_bundle) for w in webhooks]
    if all(w.client_config.ca_bundle == b for w, b in zip(webhooks, bundles, strict=True)):
        return
    for w, bundle in zip(webhooks, bundles, strict=True):
        w.client_config.ca_bundle = bundle
    write(obj)
    log.info("caBundle injected", name=name, webhooks=len(webhooks))


def _set_api_service_ca_bundle(api: client.ApiClient, name: str, wanted: Callable[[str | bytes | None], str]) -> None:
    """Point the APIService at our CA bundle, as `_set_ca_bundle` does a webhook configuration; a `Conflict`
    propagates to a retry."""
    registration = client.ApiregistrationV1Api(api)
    try:
        with translated():
            obj = registration.read_api_service(name)
    except NotFound:
        log.warning("APIService not found", name=name)
        return
    spec = obj.spec
    if spec is None:
        raise ValueError(f"apiservices {name} has no spec")
    bundle = wanted(spec.ca_bundle)
    if spec.ca_bundle == bundle:
        return
    spec.ca_bundle = bundle
    registration.replace_api_service(name, obj)
    log.info("caBundle injected", name=name, apiservice=True)


def _state_from_secret(secret: client.V1Secret) -> CertificateState | None:
    data = secret.data or {}
    annotations = (secret.metadata.annotations if secret.metadata else None) or {}
    try:
        return CertificateState(
            ca_bundle_pem=base64.b64decode(data["ca.crt"]),
            ca_key_pem=base64.b64decode(data["ca.key"]),
            cert_pem=base64.b64decode(data["tls.crt"]),
            key_pem=base64.b64decode(data["tls.key"]),
            bundle_changed_at=dt.datetime.fromisoformat(annotations[BUNDLE_CHANGED_AT]),
            cert_changed_at=dt.datetime.fromisoformat(annotations[CERT_CHANGED_AT]),
        )
    except (KeyError, ValueError):
        # Incomplete (e.g. an empty Secret made by hand): rotation replaces it as a whole.
        return None


def _secret_body(
    settings: RotationSettings, state: CertificateState, current: client.V1Secret | None
) -> client.V1Secret:
    """The new Secret; `resourceVersion` carried over from the read makes the update conditional."""
    metadata = (current.metadata if current is not None else None) or client.V1ObjectMeta(name=settings.secret_name)
    metadata.managed_fields = None
    metadata.annotations = {
        **(metadata.annotations or {}),
        BUNDLE_CHANGED_AT: state.bundle_changed_at.isoformat(),
        CERT_CHANGED_AT: state.cert_changed_at.isoformat(),
    }
    metadata.labels = {**(metadata.labels or {}), "app.kubernetes.io/managed-by": "phalanx-webhook"}
    owners = list(metadata.owner_references or [])
    if settings.owner is not None and not any(o.uid == settings.owner["uid"] for o in owners):
        owner = settings.owner
        owners.append(
            client.V1OwnerReference(
                api_version=owner["apiVersion"], kind=owner["kind"], name=owner["name"], uid=owner["uid"]
            )
        )
    metadata.owner_references = owners or None
    return client.V1Secret(
        api_version="v1",
        kind="Secret",
        metadata=metadata,
        type=(current.type if current is not None else None) or "kubernetes.io/tls",
        data={
            "ca.crt": base64.b64encode(state.ca_bundle_pem).decode(),
            "ca.key": base64.b64encode(state.ca_key_pem).decode(),
            "tls.crt": base64.b64encode(state.cert_pem).decode(),
            "tls.key": base64.b64encode(state.key_pem).decode(),
        },
    )


def _publish(directory: Path, files: Mapping[str, bytes]) -> None:
    """Swap all files at once, as the kubelet does for Secret volumes, so a handshake never
    pairs a new key with an old certificate.

    `directory/<name>` is a symlink to `..data/<name>`, and `..data` a symlink to a fresh
    hidden directory; renaming a new `..data` over the old one is atomic.
    """
    data_link = directory / "..data"
    if data_link.exists() and all(
        (data_link / name).is_file() and (data_link / name).read_bytes() == content for name, content in files.items()
    ):
        return
    directory.mkdir(parents=True, exist_ok=True)
    previous = data_link.resolve() if data_link.is_symlink() else None
    fresh = Path(tempfile.mkdtemp(dir=directory, prefix="..certs-"))
    for name, content in files.items():
        fd = os.open(fresh / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
    tmp_link = directory / "..data_tmp"
    tmp_link.unlink(missing_ok=True)
    tmp_link.symlink_to(fresh.name)
    os.replace(tmp_link, data_link)
    for name in files:
        link = directory / name
        if not link.is_symlink():
            link.unlink(missing_ok=True)
            link.symlink_to(Path("..data") / name)
    if previous is not None and previous != fresh:
        shutil.rmtree(previous, ignore_errors=True)
