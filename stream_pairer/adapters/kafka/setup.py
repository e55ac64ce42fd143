"""Session setup: the topics a session needs (created explicitly, checked), their size limits, and the
delivery and repartition stages built to fit them. See topics.py for why nothing is auto-created.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from aiokafka.admin import AIOKafkaAdminClient

from stream_pairer.adapters.kafka.checkpoints import CheckpointStore
from stream_pairer.adapters.kafka.clients import MAX_BATCH_BYTES, RECORD_OVERHEAD_BYTES
from stream_pairer.adapters.kafka.delivery import AtLeastOnce, Delivery
from stream_pairer.adapters.kafka.rekeyer import Rekeyer
from stream_pairer.adapters.kafka.shared import SidecarState
from stream_pairer.adapters.kafka.topics import (
    TopicSpec,
    max_message_bytes,
    topic_configs,
    verify_checkpoint_topics,
)
from stream_pairer.adapters.kafka.transactions import ExactlyOnce

log = logging.getLogger("stream_pairer.adapters.kafka.sidecar")


class SetupMixin(SidecarState):
    def _topic_specs(self, counts: dict[str, int], store: CheckpointStore) -> list[TopicSpec]:
        cfg = self.config
        specs = []
        # The re-keyed copy takes every record the formats can read whole (--max-record-bytes).
        internal = {"max.message.bytes": str(max(cfg.formats.max_record_bytes + 64 * 1024, 1_048_588))}
        for topic, n in counts.items():
            consumed = cfg.consumed_topic(topic)
            if consumed != topic:
                specs.append(TopicSpec(consumed, n, configs=internal))
            specs += [TopicSpec(name, n) for name in cfg.outputs(topic).all()]
            specs.append(TopicSpec(store.topic_for(consumed), n, compacted=True))
        return specs

    async def _check_topics(self, admin: AIOKafkaAdminClient, specs: list[TopicSpec]) -> dict[str, int]:
        """Verify the checkpoint topics (refuse wrong settings) and return every topic's
        `max.message.bytes`, which outputs are fitted under."""
        configs = await topic_configs(admin, [s.name for s in specs])
        verify_checkpoint_topics(configs, [s.name for s in specs if s.compacted])
        sizes = {s.name: max_message_bytes(configs.get(s.name, {})) for s in specs if not s.compacted}
        self._output_topics = [s.name for s in specs if not s.compacted]
        small = {t: n for t, n in sizes.items() if n - RECORD_OVERHEAD_BYTES < self.config.max_output_bytes}
        if small:
            log.info(
                "output records are fitted under these topics' max.message.bytes: %s",
                ", ".join(f"{t}={n}" for t, n in sorted(small.items())),
            )
        return sizes

    def _make_delivery(self, store: CheckpointStore, sizes: dict[str, int]) -> Delivery:
        cfg = self.config
        # A producer batch must fit the smallest destination's max.message.bytes: the broker checks
        # the whole batch against it, not each record.
        batch = min([MAX_BATCH_BYTES, *(n - RECORD_OVERHEAD_BYTES for n in sizes.values())])
        settings = replace(self.settings, max_batch_bytes=max(batch, 16 * 1024))
        delivery: Delivery
        if cfg.exactly_once:
            delivery = ExactlyOnce(settings, cfg.group_id, store, self.metrics, cfg.transactional_id_prefix)
        else:
            delivery = AtLeastOnce(settings, cfg.group_id, store, self.metrics)
        delivery.set_limits(sizes)
        delivery.watch = self._outputs_watch
        self._delivery = delivery
        return delivery

    def _start_rekeyer(self, sizes: dict[str, int]) -> None:
        cfg = self.config
        rekeyer = Rekeyer(
            self.settings,
            f"{cfg.group_id}.repartition",
            {t: cfg.consumed_topic(t) for t in cfg.input_topics},
            cfg.formats,
            exactly_once=cfg.exactly_once,
            transactional_id_prefix=cfg.transactional_id_prefix,
            max_records=cfg.max_records,
            poll_timeout_s=cfg.poll_timeout_s,
            auto_offset_reset=cfg.auto_offset_reset,
            isolation_level=cfg.isolation_level,
            max_message_bytes={t: n for t, n in sizes.items() if t in self._origin},
            backoff=self._rekey_backoff,
        )
        self._rekeyer = asyncio.create_task(rekeyer.run(self._stopping), name="stream-pairer-repartition")

    async def _refresh_limits(self) -> None:
        """After a size refusal: read the output topics' limits again (someone lowered one)."""
        if self._admin is None or self._delivery is None:
            return
        try:
            configs = await topic_configs(self._admin, self._output_topics)
        except Exception as err:
            log.warning("re-reading the output topics' max.message.bytes failed: %s", err)
            return
        self._delivery.set_limits({t: max_message_bytes(c) for t, c in configs.items()})
