"""Client settings: Java-style ``--command-config`` properties files and ``--profile`` entries.

Operators already have a ``client.properties`` for ``kafka-transactions.sh``; kafkatx
reads the same file and translates it twice: to librdkafka properties for
confluent-kafka and to keyword arguments for kafka-python's ``KafkaAdminClient``.
Keys kafkatx does not understand are reported as warnings (Kafka's own tools log
"The configuration 'x' was supplied but isn't a known config"), never silently
dropped and never fatal.

Java properties syntax (``java.util.Properties.load``): ``key=value``, ``key:
value`` or ``key value``; ``#``/``!`` comments; a trailing backslash continues
the line; ``\\`` escapes. ``sasl.jaas.config`` embeds a JAAS login-module line
from which the username/password are parsed out, as librdkafka and kafka-python
take them as separate settings.

Profiles live in ``$XDG_CONFIG_HOME/kafkatx/profiles.yaml`` (default
``~/.config/kafkatx/profiles.yaml``)::

    profiles:
      prod:
        bootstrap_server: broker1:9093
        command_config: ~/prod-client.properties   # optional
        properties:                                # optional, override the file
          security.protocol: SASL_SSL
          sasl.mechanism: SCRAM-SHA-512
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from kafkatx.errors import UsageError
from kafkatx.storage.broker_config import parse_properties, unescape_property  # noqa: F401 (parse_properties: re-exported)
from kafkatx.storage.broker_config import read_properties_file as read_broker_properties_file

log = logging.getLogger("kafkatx.cluster")

MAX_CONFIG_BYTES = 1 << 20  # a client properties file is a few hundred bytes; refuse anything silly


class ClientConfig(Struct, frozen=True, kw_only=True):
    """Translated client settings (without bootstrap servers, which come from the caller)."""

    confluent: dict[str, Any] = field(default_factory=dict)  # librdkafka property names
    kafka_python: dict[str, Any] = field(default_factory=dict)  # KafkaAdminClient kwargs
    warnings: tuple[str, ...] = ()
    source: str | None = None  # the file or profile the settings came from, for messages


class Profile(Struct, frozen=True, kw_only=True):
    name: str
    bootstrap_server: str | None
    properties: dict[str, str]
    command_config: Path | None = None


# ---------------------------------------------------------------- properties files

def read_properties_file(path: Path) -> dict[str, str]:
    return read_broker_properties_file(path, "command config", MAX_CONFIG_BYTES)


# ---------------------------------------------------------------- JAAS

_JAAS_RE = re.compile(r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)\b(?P<opts>.*?);?\s*$",
                      re.S)
_JAAS_OPT_RE = re.compile(r'(\w[\w.]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;]+))')


def parse_jaas_config(value: str) -> tuple[str, dict[str, str]]:
    """``org...PlainLoginModule required username="u" password="p";`` -> (module, options)."""
    match = _JAAS_RE.match(value)
    if match is None:
        raise UsageError("sasl.jaas.config: expected '<LoginModule> required key=\"value\" ...;'")
    options = {
        m.group(1): unescape_property(m.group(2)) if m.group(2) is not None else m.group(3)
        for m in _JAAS_OPT_RE.finditer(match.group("opts"))
    }
    return match.group("module"), options


# ---------------------------------------------------------------- translation

# Keys that map one to one: Java name -> (librdkafka name, kafka-python kwarg or None).
_DIRECT: dict[str, tuple[str | None, str | None]] = {
    "security.protocol": ("security.protocol", "security_protocol"),
    "sasl.mechanism": ("sasl.mechanism", "sasl_mechanism"),
    "client.id": ("client.id", "client_id"),
    "sasl.kerberos.service.name": ("sasl.kerberos.service.name", "sasl_kerberos_service_name"),
    "ssl.key.password": ("ssl.key.password", "ssl_password"),
    "ssl.keystore.password": ("ssl.keystore.password", None),
    "ssl.cipher.suites": ("ssl.cipher.suites", None),
    "ssl.enabled.protocols": (None, None),  # librdkafka negotiates TLS versions itself
    "ssl.protocol": (None, None),
    "ssl.truststore.password": (None, None),  # only meaningful for JKS/PKCS12 truststores
    "ssl.truststore.type": (None, None),
    "ssl.keystore.type": (None, None),
    "request.timeout.ms": (None, None),  # kafkatx drives its own --timeout
    "default.api.timeout.ms": (None, None),
    "retries": (None, None),
    "retry.backoff.ms": (None, None),
    "bootstrap.servers": (None, None),  # --bootstrap-server wins, as in kafka-transactions.sh
}

_PEM_HINT = "convert it to PEM (keytool -exportcert -rfc, or openssl pkcs12 -nokeys) and use ssl.truststore.type=PEM"


def _is_pem(path: Path, declared: str | None) -> bool:
    if declared is not None:
        return declared.upper() == "PEM"
    if path.suffix.lower() in (".pem", ".crt", ".cer"):
        return True
    try:
        with path.open("rb") as fh:
            return b"-----BEGIN" in fh.read(4096)
    except OSError:
        return False


def translate(props: Mapping[str, str], *, source: str | None = None) -> ClientConfig:
    """Map Java client properties to confluent-kafka config and kafka-python kwargs."""
    ck: dict[str, Any] = {}
    kp: dict[str, Any] = {}
    warns: list[str] = []
    where = f"{source}: " if source else ""

    for key, value in props.items():
        if key in _DIRECT:
            ck_name, kp_name = _DIRECT[key]
            if ck_name:
                ck[ck_name] = value
            if kp_name:
                kp[kp_name] = value
            continue
        if key in ("sasl.jaas.config", "ssl.truststore.location", "ssl.truststore.certificates",
                   "ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain",
                   "ssl.endpoint.identification.algorithm", "sasl.kerberos.keytab",
                   "sasl.kerberos.principal"):
            continue  # handled below, they depend on each other
        warns.append(f"{where}'{key}' is not a setting kafkatx knows; ignored")

    if "security.protocol" in props:
        protocol = props["security.protocol"].upper()
        if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise UsageError(f"{where}security.protocol={props['security.protocol']} is not one of "
                             "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")
        ck["security.protocol"] = protocol
        kp["security_protocol"] = protocol

    jaas = props.get("sasl.jaas.config")
    if jaas is not None:
        module, options = parse_jaas_config(jaas)
        short = module.rsplit(".", 1)[-1]
        if short in ("PlainLoginModule", "ScramLoginModule"):
            if "username" not in options or "password" not in options:
                raise UsageError(f"{where}sasl.jaas.config: {short} needs username and password")
            ck["sasl.username"] = options["username"]
            ck["sasl.password"] = options["password"]
            kp["sasl_plain_username"] = options["username"]
            kp["sasl_plain_password"] = options["password"]
        elif short == "Krb5LoginModule":
            if "keyTab" in options:
                ck["sasl.kerberos.keytab"] = options["keyTab"]
            if "principal" in options:
                ck["sasl.kerberos.principal"] = options["principal"]
                kp["sasl_kerberos_name"] = options["principal"]
        else:
            warns.append(f"{where}sasl.jaas.config: login module {module} is not supported; ignored")
    for key, ck_name in (("sasl.kerberos.keytab", "sasl.kerberos.keytab"),
                         ("sasl.kerberos.principal", "sasl.kerberos.principal")):
        if key in props:
            ck[ck_name] = props[key]

    # Java reads truststores/keystores as JKS, PKCS12 or PEM; librdkafka and Python's ssl module
    # want PEM files (librdkafka also takes a PKCS12 keystore, kafka-python does not).
    trust = props.get("ssl.truststore.location")
    if trust is not None:
        path = Path(trust).expanduser()
        if not _is_pem(path, props.get("ssl.truststore.type")):
            raise UsageError(f"{where}ssl.truststore.location={trust}: only PEM truststores are supported; "
                             + _PEM_HINT)
        ck["ssl.ca.location"] = str(path)
        kp["ssl_cafile"] = str(path)
    if "ssl.truststore.certificates" in props:
        ck["ssl.ca.pem"] = props["ssl.truststore.certificates"]
        warns.append(f"{where}ssl.truststore.certificates is used by confluent-kafka only; "
                     "give a PEM file in ssl.truststore.location for the KIP-664 admin calls")

    keystore = props.get("ssl.keystore.location")
    if keystore is not None:
        path = Path(keystore).expanduser()
        if _is_pem(path, props.get("ssl.keystore.type")):
            # A PEM keystore holds the private key and the certificate chain in one file.
            ck["ssl.certificate.location"] = str(path)
            ck["ssl.key.location"] = str(path)
            kp["ssl_certfile"] = str(path)
            kp["ssl_keyfile"] = str(path)
        else:
            ck["ssl.keystore.location"] = str(path)
            warns.append(f"{where}ssl.keystore.location is a PKCS12/JKS keystore: confluent-kafka uses it, "
                         "the KIP-664 admin calls (kafka-python) need a PEM keystore")
    if "ssl.keystore.key" in props:
        ck["ssl.key.pem"] = props["ssl.keystore.key"]
    if "ssl.keystore.certificate.chain" in props:
        ck["ssl.certificate.pem"] = props["ssl.keystore.certificate.chain"]

    algo = props.get("ssl.endpoint.identification.algorithm")
    if algo is not None:
        # Java: empty string disables hostname verification, "https" enables it.
        ck["ssl.endpoint.identification.algorithm"] = "https" if algo.strip() else "none"
        kp["ssl_check_hostname"] = bool(algo.strip())

    return ClientConfig(confluent=ck, kafka_python=kp, warnings=tuple(warns), source=source)


# ---------------------------------------------------------------- profiles

def profiles_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or ""
    root = Path(base) if base and Path(base).is_absolute() else Path(env.get("HOME") or Path.home()) / ".config"
    return root / "kafkatx" / "profiles.yaml"


def load_profile(name: str, *, path: Path | None = None) -> Profile:
    import yaml

    path = path or profiles_path()
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise UsageError(f"{path}: profiles file larger than {MAX_CONFIG_BYTES} bytes")
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise UsageError(f"--profile {name}: {path} does not exist") from err
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: cannot read profiles: {err}") from err
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f"line {mark.line + 1}: " if mark is not None else ""
        raise UsageError(f"{path}: {at}not valid YAML") from err
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: expected a mapping of profiles")
    profiles = doc.get("profiles", doc)
    if not isinstance(profiles, dict) or name not in profiles:
        known = ", ".join(sorted(str(k) for k in profiles)) if isinstance(profiles, dict) else ""
        raise UsageError(f"{path}: no profile named {name!r}" + (f" (have: {known})" if known else ""))
    entry = profiles[name]
    if not isinstance(entry, dict):
        raise UsageError(f"{path}: profile {name!r} must be a mapping")
    unknown = set(entry) - {"bootstrap_server", "properties", "command_config"}
    for key in sorted(unknown):
        log.warning("%s: profile %r: unknown key %r ignored", path, name, key)
    props = entry.get("properties") or {}
    if not isinstance(props, dict):
        raise UsageError(f"{path}: profile {name!r}: properties must be a mapping")
    bootstrap = entry.get("bootstrap_server")
    command_config = entry.get("command_config")
    return Profile(
        name=name,
        bootstrap_server=str(bootstrap) if bootstrap is not None else None,
        properties={str(k): "" if v is None else str(v) for k, v in props.items()},
        command_config=Path(str(command_config)).expanduser() if command_config else None,
    )


def resolve(*, bootstrap_server: str | None, command_config: Path | None = None,
            profile: str | None = None, profiles_file: Path | None = None) -> tuple[str, ClientConfig]:
    """Combine flag, profile and properties file (flags win, then the file, then the profile's
    inline properties) into the bootstrap string and translated settings. Warnings are logged."""
    props: dict[str, str] = {}
    sources: list[str] = []
    prof: Profile | None = None
    if profile is not None:
        prof = load_profile(profile, path=profiles_file)
        if prof.command_config is not None:
            props.update(read_properties_file(prof.command_config))
            sources.append(str(prof.command_config))
        props.update(prof.properties)
        sources.append(f"profile {profile}")
    if command_config is not None:
        props.update(read_properties_file(Path(command_config)))
        sources.append(str(command_config))
    bootstrap = bootstrap_server or (prof.bootstrap_server if prof else None) or props.get("bootstrap.servers")
    if not bootstrap:
        raise UsageError("no bootstrap server: give --bootstrap-server or a profile with bootstrap_server")
    cfg = translate(props, source=", ".join(sources) or None)
    for message in cfg.warnings:
        log.warning("%s", message)
    return bootstrap, cfg
