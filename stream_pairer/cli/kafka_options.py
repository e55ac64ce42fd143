"""Kafka connection options shared by every command that talks to Kafka (`run`, `audit`).

Flag names follow aiokafka's parameter names (`--security-protocol`, `--sasl-mechanism`,
`--ssl-cafile`, ...) so an operator who knows the client can guess them; each has its
`STREAM_PAIRER_*` variable like every other option. Passwords come from a file or an environment
variable only, never from a flag value (argv is visible in `ps` and in supervisors' logs):
`--sasl-password-file` or STREAM_PAIRER_SASL_PASSWORD, `--ssl-password-file` or
STREAM_PAIRER_SSL_PASSWORD. The parsing into aiokafka arguments lives in
`stream_pairer.adapters.kafka.security`.
"""

from __future__ import annotations

import argparse

from stream_pairer.adapters.kafka.security import (
    MECHANISMS,
    PROTOCOLS,
    FileTokenProvider,
    KafkaSecurity,
    check_client_config,
    parse_client_config,
    read_secret,
)
from stream_pairer.cli.options import add_option

SASL_PASSWORD_ENV = "STREAM_PAIRER_SASL_PASSWORD"
SSL_PASSWORD_ENV = "STREAM_PAIRER_SSL_PASSWORD"


def add_security_arguments(parser: argparse.ArgumentParser, *, producer: bool = True) -> None:
    g = parser.add_argument_group("Kafka security (TLS, SASL) and client settings")
    add_option(
        g,
        "--security-protocol",
        default="PLAINTEXT",
        help=f"how clients connect: {', '.join(PROTOCOLS)}",
    )
    add_option(g, "--sasl-mechanism", help=f"SASL mechanism: {', '.join(MECHANISMS)}")
    add_option(g, "--sasl-username", help="SASL user name (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
    add_option(
        g,
        "--sasl-password-file",
        help=f"file holding the SASL password (a mounted Secret); or set {SASL_PASSWORD_ENV}",
    )
    add_option(
        g,
        "--sasl-oauth-token-file",
        help="OAUTHBEARER: file holding the access token, re-read whenever it changes",
    )
    add_option(
        g, "--ssl-cafile", help="PEM CA bundle the broker certificates must chain to (default: system)"
    )
    add_option(g, "--ssl-certfile", help="PEM client certificate (mutual TLS)")
    add_option(g, "--ssl-keyfile", help="PEM private key of --ssl-certfile (default: inside --ssl-certfile)")
    add_option(
        g,
        "--ssl-password-file",
        help=f"file holding the password of an encrypted --ssl-keyfile; or set {SSL_PASSWORD_ENV}",
    )
    add_option(
        g,
        "--ssl-no-check-hostname",
        action="store_true",
        default=False,
        help="do not check the broker certificate's name against the address (the chain is still verified)",
    )
    add_option(
        g,
        "--consumer-config",
        action="append",
        default=None,
        sensitive=True,
        help="extra aiokafka consumer parameter key=value (repeatable; e.g. fetch_min_bytes=1024)",
    )
    if producer:
        add_option(
            g,
            "--producer-config",
            action="append",
            default=None,
            sensitive=True,
            help="extra aiokafka producer parameter key=value (repeatable; e.g. compression_type=gzip)",
        )


def security_from_args(args: argparse.Namespace) -> KafkaSecurity:
    """The security settings the options and environment describe. Raises ConfigError with a
    message that names the option, never a secret's value."""
    mechanism = args.sasl_mechanism.strip().upper() if args.sasl_mechanism else None
    token = None
    if args.sasl_oauth_token_file:
        token = FileTokenProvider(args.sasl_oauth_token_file)
    # `append` options: flag values plus the comma-separated environment variable (add_option).
    consumer = parse_client_config("consumer", args.consumer_config or [])
    producer = parse_client_config("producer", getattr(args, "producer_config", None) or [])
    security = KafkaSecurity(
        security_protocol=(args.security_protocol or "PLAINTEXT").strip().upper(),
        sasl_mechanism=mechanism,
        sasl_username=args.sasl_username,
        sasl_password=read_secret(args.sasl_password_file, SASL_PASSWORD_ENV, "SASL password"),
        sasl_token_provider=token,
        ssl_cafile=args.ssl_cafile,
        ssl_certfile=args.ssl_certfile,
        ssl_keyfile=args.ssl_keyfile,
        ssl_password=read_secret(args.ssl_password_file, SSL_PASSWORD_ENV, "TLS key password"),
        ssl_check_hostname=not args.ssl_no_check_hostname,
        consumer_config=consumer,
        producer_config=producer,
        sasl_password_file=args.sasl_password_file,
        ssl_password_file=args.ssl_password_file,
    )
    security.client_kwargs()  # load the CA, certificate and key now: a bad file is a start-up error
    check_client_config(consumer, producer)
    return security
