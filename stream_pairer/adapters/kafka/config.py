"""The sidecar's configuration, checked when it is built (bad values fail at start, not once connected)."""

from __future__ import annotations

from dataclasses import dataclass, field

from stream_pairer.adapters.kafka.fetching import DEFAULT_PREFETCH_BACKOFF_S
from stream_pairer.adapters.kafka.security import PLAINTEXT, KafkaSecurity
from stream_pairer.adapters.kafka.topics import check_template, render_template
from stream_pairer.core.config import EngineConfig, TaggingConfig
from stream_pairer.core.formats import DEFAULT_CONFIG, FormatConfig
from stream_pairer.ops.heap import DEFAULT_INTERVAL_S as DEFAULT_TRIM_INTERVAL_S
from stream_pairer.stream.partition import DEAD_LETTER_TOPIC, ORPHANS_TOPIC, PAIRS_TOPIC, OutputTopics


@dataclass(frozen=True, slots=True)
class SidecarConfig:
    bootstrap_servers: str
    input_topics: tuple[str, ...]
    group_id: str
    exactly_once: bool = False
    pairs_topic: str = PAIRS_TOPIC
    orphans_topic: str = ORPHANS_TOPIC
    dead_letter_topic: str = DEAD_LETTER_TOPIC
    checkpoint_topic: str = "{topic}.pairer-checkpoints"
    create_topics: bool = True
    replication_factor: int = 1
    transactional_id_prefix: str = "stream-pairer"
    client_id: str = "stream-pairer"
    engine: EngineConfig = field(default_factory=EngineConfig)
    formats: FormatConfig = DEFAULT_CONFIG
    # Failure tagging's settings; each partition's core keeps its own tagging state, so a replay
    # on another instance tags exactly as the first pass did.
    tagger: TaggingConfig | None = None
    max_records: int = 1000
    poll_timeout_s: float = 0.2
    # How long one partition's unconsumed records may hold back the fetches of the other partitions
    # of its broker (aiokafka's prefetch_backoff, not passed through by AIOKafkaConsumer; fetching.py).
    prefetch_backoff_s: float = DEFAULT_PREFETCH_BACKOFF_S
    # Send the next fetch as a loop turn starts (fetching.hand_off): latency where turns or round
    # trips are long, for ~8 % more CPU per record at full speed (BENCHMARKS.md, issue 25).
    fetch_ahead: bool = True
    tick_interval_s: float = 1.0
    heap_trim_interval_s: float = DEFAULT_TRIM_INTERVAL_S  # ops/heap.py; 0: never
    commit_interval_s: float | None = None  # None: 1 s at-least-once, 0.05 s exactly-once (issue 25)
    shutdown_timeout_s: float = 30.0
    flush_on_shutdown: bool = False
    # Commit the processed position, the held events' positions living in the checkpoint (issue 25);
    # False: the committed offset stays at the oldest held event (the rule before).
    commit_processed: bool = True
    auto_offset_reset: str = "earliest"
    isolation_level: str = "read_committed"
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 1_000
    request_timeout_ms: int = 30_000
    max_output_bytes: int = 1_000_000
    http_host: str = "0.0.0.0"
    http_port: int | None = 9464  # None: no HTTP server; 0: an ephemeral port
    ready_timeout_s: float = 15.0
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    checkpoint_match_wait_s: float = 5.0
    repartition: bool = False
    repartition_topic: str = "{topic}.by-conversation"
    security: KafkaSecurity = PLAINTEXT  # TLS/SASL and client pass-through (security.py)

    def __post_init__(self) -> None:
        if not self.input_topics:
            raise ValueError("at least one input topic is needed")
        if not self.group_id:
            raise ValueError("a consumer group id is needed")
        for name in ("poll_timeout_s", "tick_interval_s", "shutdown_timeout_s", "ready_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0")
        if self.prefetch_backoff_s < 0:
            raise ValueError("prefetch_backoff_s must be >= 0")
        if self.heap_trim_interval_s < 0:
            raise ValueError("heap_trim_interval_s must be >= 0")
        if self.commit_interval_s is not None and self.commit_interval_s < 0:
            raise ValueError("commit_interval_s must be >= 0")
        if self.auto_offset_reset not in ("earliest", "latest"):
            raise ValueError("auto_offset_reset must be earliest or latest")
        if self.isolation_level not in ("read_committed", "read_uncommitted"):
            raise ValueError("isolation_level must be read_committed or read_uncommitted")
        for option, template, allowed in (
            ("--pairs-topic", self.pairs_topic, ("topic",)),
            ("--orphans-topic", self.orphans_topic, ("topic",)),
            ("--dead-letter-topic", self.dead_letter_topic, ("topic",)),
            ("--checkpoint-topic", self.checkpoint_topic, ("topic", "group")),
            ("--repartition-topic", self.repartition_topic, ("topic",)),
        ):
            check_template(option, template, allowed)

    @property
    def commit_every_s(self) -> float:
        if self.commit_interval_s is not None:
            return self.commit_interval_s
        return 0.05 if self.exactly_once else 1.0

    def consumed_topic(self, input_topic: str) -> str:
        """The topic the pairing loop reads for an input topic (its re-keyed copy under --repartition)."""
        return (
            render_template(self.repartition_topic, {"topic": input_topic})
            if self.repartition
            else input_topic
        )

    def outputs(self, topic: str) -> OutputTopics:
        names = (self.pairs_topic, self.orphans_topic, self.dead_letter_topic)
        return OutputTopics(*(render_template(t, {"topic": topic}) for t in names))
