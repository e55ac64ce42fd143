"""Topics: explicit creation with their config, verification of existing ones, size limits, templates.

Why explicit: with `auto.create.topics.enable=true` (Kafka's default) any metadata request names a
topic into existence with the broker's defaults (`cleanup.policy=delete`, 1 MiB messages). A
checkpoint topic created that way silently loses checkpoints to retention; an output topic with a
smaller `max.message.bytes` than we assume turns one large record into an endless retry. So every
metadata lookup here asks the broker *not* to auto-create, topics are created with `CreateTopics`
and their config, and existing ones are read back (`DescribeConfigs`) and checked at start.
"""

from __future__ import annotations

import asyncio
import logging
import string
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.protocol.metadata import MetadataRequest

from stream_pairer.adapters.kafka.clients import MAX_CHECKPOINT_BYTES
from stream_pairer.errors import ConfigError

log = logging.getLogger("stream_pairer.kafka")

TOPIC_ALREADY_EXISTS = 36
BROKER_DEFAULT_MESSAGE_BYTES = 1_048_588  # message.max.bytes when a topic does not say
CHECKPOINT_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "max.message.bytes": str(MAX_CHECKPOINT_BYTES + 1024),
    # Small segments and an eager cleaner: only the latest checkpoint per partition matters.
    "segment.ms": "600000",
    "min.cleanable.dirty.ratio": "0.1",
}


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    compacted: bool = False
    configs: dict[str, str] = field(default_factory=dict)  # set at creation (plus the compaction config)

    def creation_configs(self) -> dict[str, str]:
        return {**(CHECKPOINT_TOPIC_CONFIG if self.compacted else {}), **self.configs}


# ------------------------------------------------------------------------------ templates


def check_template(option: str, template: str, allowed: Sequence[str]) -> None:
    """A topic template may use only `{name}` placeholders from `allowed`: no attribute access,
    index, conversion or format spec (`str.format` would accept `{topic.__class__}` and crash on an
    unknown key only once connected). Raises ValueError naming the option."""
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as err:
        raise ValueError(f"{option} {template!r}: {err}") from err
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if name not in allowed or spec or conversion:
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            raise ValueError(
                f"{option} {template!r}: placeholder {shown} is not allowed; "
                f"use only {', '.join('{' + a + '}' for a in allowed)}"
            )
    if not render_template(template, dict.fromkeys(allowed, "x")):
        raise ValueError(f"{option} {template!r} gives an empty topic name")


def render_template(template: str, values: dict[str, str]) -> str:
    """Fill a checked template (plain placeholders only: no attribute or index lookups happen)."""
    return "".join(
        lit + (values[name] if name is not None else "")
        for lit, name, _, _ in string.Formatter().parse(template)
    )


# -------------------------------------------------------------------------------- metadata


async def topic_partitions(admin: AIOKafkaAdminClient, names: Sequence[str]) -> dict[str, int]:
    """Partition counts of the topics that exist (missing ones are absent from the result). The
    metadata request says `allow_auto_topic_creation=false`: looking must not create."""
    out: dict[str, int] = {}
    if not names:
        return out
    response = await admin._send_request(MetadataRequest(list(names), allow_auto_topic_creation=False))
    for meta in response.to_object()["topics"]:
        if meta.get("error_code", 0) == 0 and meta.get("partitions"):
            out[meta["topic"]] = len(meta["partitions"])
    return out


async def topic_configs(admin: AIOKafkaAdminClient, names: Iterable[str]) -> dict[str, dict[str, str]]:
    """`cleanup.policy` and `max.message.bytes` of each existing topic (missing topics absent)."""
    names = list(names)
    if not names:
        return {}
    wanted = {"cleanup.policy": None, "max.message.bytes": None}
    resources = [ConfigResource(ConfigResourceType.TOPIC, n, dict(wanted)) for n in names]
    out: dict[str, dict[str, str]] = {}
    for response in await admin.describe_configs(resources):
        for res in response.to_object()["resources"]:
            if res["error_code"] != 0:
                continue
            out[res["resource_name"]] = {e["config_names"]: e["config_value"] for e in res["config_entries"]}
    return out


def max_message_bytes(configs: dict[str, str]) -> int:
    try:
        return int(configs.get("max.message.bytes", BROKER_DEFAULT_MESSAGE_BYTES))
    except ValueError:
        return BROKER_DEFAULT_MESSAGE_BYTES


async def ensure_topics(
    admin: AIOKafkaAdminClient, specs: Iterable[TopicSpec], *, replication_factor: int, create: bool
) -> dict[str, int]:
    """Create the topics that do not exist yet, with their config; return every topic's partition
    count. `create=False` (--no-create-topics): a missing topic is a ConfigError instead."""
    specs = list(specs)
    existing = await topic_partitions(admin, [s.name for s in specs])
    missing = [s for s in specs if s.name not in existing]
    if missing and not create:
        raise ConfigError(
            f"topics missing and --no-create-topics given: {', '.join(s.name for s in missing)}"
        )
    if missing:
        new = [
            NewTopic(
                s.name,
                num_partitions=s.partitions,
                replication_factor=replication_factor,
                topic_configs=s.creation_configs(),
            )
            for s in missing
        ]
        resp = await admin.create_topics(new)
        created = []
        for name, code, *rest in resp.topic_errors:
            if code == 0:
                created.append(name)
            elif code != TOPIC_ALREADY_EXISTS:
                message = rest[0] if rest else ""
                raise ConfigError(f"cannot create topic {name}: error {code} {message}")
        if created:
            log.info("created topics %s", ", ".join(created))
        deadline = time.monotonic() + 30
        while True:  # wait until the new partitions have leaders
            existing = await topic_partitions(admin, [s.name for s in specs])
            if all(s.name in existing for s in specs) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
    return existing


def verify_checkpoint_topics(configs: dict[str, dict[str, str]], names: Iterable[str]) -> None:
    """A checkpoint topic must be compacted (only the latest checkpoint per partition matters, and
    retention would delete a quiet partition's only one) and take a whole checkpoint. Wrong settings
    are refused with the command that fixes them, never worked around."""
    problems = []
    for name in names:
        conf = configs.get(name)
        if conf is None:
            problems.append(f"{name}: its configuration could not be read")
            continue
        policy = {p.strip() for p in conf.get("cleanup.policy", "delete").split(",")}
        if "compact" not in policy:
            problems.append(f"{name}: cleanup.policy={conf.get('cleanup.policy')} (needs compact)")
        size = max_message_bytes(conf)
        if size < MAX_CHECKPOINT_BYTES:
            problems.append(f"{name}: max.message.bytes={size} (needs >= {MAX_CHECKPOINT_BYTES})")
    if problems:
        raise ConfigError(
            "checkpoint topic settings are wrong (created by auto-creation or by hand?): "
            + "; ".join(problems)
            + ". Fix with kafka-configs.sh --alter --entity-type topics --entity-name <topic> "
            "--add-config cleanup.policy=compact,max.message.bytes=16778240, or delete the topic "
            "and let stream-pairer create it"
        )


async def committed_offsets(
    admin: AIOKafkaAdminClient, group: str, tps: Iterable[TopicPartition]
) -> dict[TopicPartition, tuple[int | None, str]]:
    """The group's committed offset and commit metadata per partition ((None, "") when none)."""
    tps = list(tps)
    got: dict[Any, Any] = await admin.list_consumer_group_offsets(group, partitions=tps)
    out: dict[TopicPartition, tuple[int | None, str]] = {}
    for tp in tps:
        om = got.get(tp)
        if om is None or om.offset is None or om.offset < 0:
            out[tp] = (None, "")
        else:
            out[tp] = (int(om.offset), om.metadata or "")
    return out
