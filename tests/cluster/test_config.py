"""--command-config / --profile parsing and translation (no broker needed)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kafkatx.cluster import config
from kafkatx.errors import UsageError

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_java_properties_syntax():
    text = (
        "# comment\n! also a comment\n\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism : SCRAM-SHA-512\n"
        "client.id kafkatx-oncall\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="ops" \\\n'
        '    password="p\\\\w=d";\n'
        "key\\=with\\:escapes=v\\u0041\n"
    )
    props = config.parse_properties(text)
    assert props["security.protocol"] == "SASL_SSL"
    assert props["sasl.mechanism"] == "SCRAM-SHA-512"
    assert props["client.id"] == "kafkatx-oncall"
    assert props["key=with:escapes"] == "vA"
    assert props["sasl.jaas.config"].startswith("org.apache.kafka.common.security.scram.ScramLoginModule required")


def test_jaas_plain_and_scram_credentials():
    module, opts = config.parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3cr;et";')
    assert module.endswith("PlainLoginModule") and opts == {"username": "alice", "password": "s3cr;et"}
    cfg = config.translate({
        "security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="bob" password="pw";',
    })
    assert cfg.confluent == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                             "sasl.username": "bob", "sasl.password": "pw"}
    assert cfg.kafka_python == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-256",
                                "sasl_plain_username": "bob", "sasl_plain_password": "pw"}
    assert cfg.warnings == ()


def test_jaas_without_password_is_a_usage_error():
    with pytest.raises(UsageError, match="username and password"):
        config.translate({"sasl.jaas.config":
                          'org.apache.kafka.common.security.plain.PlainLoginModule required username="x";'})
    with pytest.raises(UsageError, match="sasl.jaas.config"):
        config.translate({"sasl.jaas.config": "not jaas at all"})


def test_pem_truststore_and_keystore(tmp_path: Path):
    ca = tmp_path / "ca.txt"
    ca.write_text(PEM)
    ks = tmp_path / "client.pem"
    ks.write_text(PEM)
    cfg = config.translate({"security.protocol": "SSL", "ssl.truststore.location": str(ca),
                            "ssl.keystore.location": str(ks), "ssl.keystore.type": "PEM",
                            "ssl.key.password": "kp", "ssl.endpoint.identification.algorithm": ""})
    assert cfg.confluent["ssl.ca.location"] == str(ca)  # detected as PEM by content
    assert cfg.kafka_python["ssl_cafile"] == str(ca)
    assert cfg.confluent["ssl.certificate.location"] == cfg.confluent["ssl.key.location"] == str(ks)
    assert cfg.kafka_python["ssl_certfile"] == cfg.kafka_python["ssl_keyfile"] == str(ks)
    assert cfg.confluent["ssl.key.password"] == cfg.kafka_python["ssl_password"] == "kp"
    assert cfg.confluent["ssl.endpoint.identification.algorithm"] == "none"
    assert cfg.kafka_python["ssl_check_hostname"] is False


def test_jks_truststore_is_refused_with_a_hint(tmp_path: Path):
    jks = tmp_path / "truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02")
    with pytest.raises(UsageError, match="only PEM truststores.*keytool"):
        config.translate({"ssl.truststore.location": str(jks)})


def test_unknown_keys_are_warned_not_fatal():
    cfg = config.translate({"linger.ms": "5", "security.protocol": "PLAINTEXT"}, source="client.properties")
    assert cfg.warnings == ("client.properties: 'linger.ms' is not a setting kafkatx knows; ignored",)
    with pytest.raises(UsageError, match="security.protocol=TLS"):
        config.translate({"security.protocol": "TLS"})


def test_profiles_respect_xdg_config_home(tmp_path: Path):
    assert config.profiles_path({"XDG_CONFIG_HOME": str(tmp_path), "HOME": "/nowhere"}) == \
        tmp_path / "kafkatx" / "profiles.yaml"
    assert config.profiles_path({"HOME": "/home/op"}) == Path("/home/op/.config/kafkatx/profiles.yaml")
    # a relative XDG_CONFIG_HOME is invalid per the spec and ignored
    assert config.profiles_path({"XDG_CONFIG_HOME": "rel", "HOME": "/h"}) == Path("/h/.config/kafkatx/profiles.yaml")


def test_resolve_profile_file_and_flag_precedence(tmp_path: Path, monkeypatch, caplog):
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nbogus.key=1\n")
    xdg = tmp_path / "xdg"
    (xdg / "kafkatx").mkdir(parents=True)
    (xdg / "kafkatx" / "profiles.yaml").write_text(
        "profiles:\n"
        "  prod:\n"
        "    bootstrap_server: prod-1:9093\n"
        f"    command_config: {props}\n"
        "    properties:\n"
        "      sasl.mechanism: SCRAM-SHA-512\n"
    )
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    with caplog.at_level(logging.WARNING, logger="kafkatx.cluster"):
        bootstrap, cfg = config.resolve(bootstrap_server=None, profile="prod")
    assert bootstrap == "prod-1:9093"
    assert cfg.confluent["sasl.mechanism"] == "SCRAM-SHA-512"  # profile properties override its file
    assert cfg.confluent["security.protocol"] == "SASL_PLAINTEXT"
    assert any("bogus.key" in r.getMessage() for r in caplog.records)
    bootstrap, _ = config.resolve(bootstrap_server="flag:9092", profile="prod")
    assert bootstrap == "flag:9092"
    with pytest.raises(UsageError, match="no profile named 'dev'.*prod"):
        config.resolve(bootstrap_server=None, profile="dev")


def test_bad_inputs_are_usage_errors(tmp_path: Path):
    with pytest.raises(UsageError, match="not found"):
        config.resolve(bootstrap_server="b:1", command_config=tmp_path / "missing.properties")
    bad_yaml = tmp_path / "p.yaml"
    bad_yaml.write_text("profiles: [unclosed\n")
    with pytest.raises(UsageError, match="not valid YAML"):
        config.load_profile("x", path=bad_yaml)
    latin = tmp_path / "latin.properties"
    latin.write_bytes(b"client.id=caf\xe9\n")
    with pytest.raises(UsageError, match="byte 13"):
        config.read_properties_file(latin)
    with pytest.raises(UsageError, match="no bootstrap server"):
        config.resolve(bootstrap_server=None)
