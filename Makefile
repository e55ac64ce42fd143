# Benchmarks (issue 6). `make bench` reproduces every table of BENCHMARKS.md on a fresh machine with
# Java, Maven, Python and kcat; `make bench-engine` is the quick, broker-free part.
# Figures are printed and appended to bench/results/*.jsonl (with the load average of the moment).
# Knobs: make bench RECORDS=1000000 SOAK_SECONDS=600 REPEAT=3

PYTHON ?= python3
RECORDS ?= 1000000
CONVERSATIONS ?= 10000
PARTITIONS ?= 4
REPEAT ?= 3
ENGINE_RECORDS ?= 300000
SOAK_SECONDS ?= 600
LATENCY_SECONDS ?= 60

PAIR_RECORDS ?= 200000
.PHONY: bench-pair bench bench-targets bench-deps bench-memory-breakdown bench-engine bench-profile bench-e2e bench-scaling bench-latency bench-memory bench-soak bench-native bench-output-size

bench: bench-deps bench-engine bench-native bench-profile bench-memory-breakdown bench-e2e bench-latency bench-scaling bench-soak bench-output-size
	$(PYTHON) bench/targets.py

# Issue 15's targets alone, each a ratio from this one run, then the table (bench/targets.py reads the
# rows just appended for this commit): the compiled core with tagging against an orjson round trip at
# 1k/100k/1M open conversations; the sidecar against the aiokafka send_batch passthrough and the Quix
# peer in both modes; latency at half of the peak just measured; a 10-minute soak after a 4-minute
# warm-up on one partition (every state bound full by minute 3 there; on 4 partitions the bounds take
# ~12 minutes to fill at the soak's rate: BENCHMARKS.md, RSS creep, second round). ~40 min in all.
bench-targets: bench-deps
	$(PYTHON) bench/pair_command.py --records $(PAIR_RECORDS) --conversations 10000 --repeat $(REPEAT)
	$(PYTHON) bench/native_bench.py --conversations 1000 100000 1000000 --records $(ENGINE_RECORDS) --repeat $(REPEAT) --variants orjson native_tag
	$(PYTHON) bench/e2e.py --records $(RECORDS) --conversations $(CONVERSATIONS) --partitions $(PARTITIONS) --repeat 1 --runners aiokafka-batch sidecar sidecar-eos quix quix-eos
	$(PYTHON) bench/latency.py --duration $(LATENCY_SECONDS)
	$(PYTHON) bench/soak.py --duration $$(( $(SOAK_SECONDS) + 240 )) --warmup 240 --partitions 1 --max-held-bytes 8388608
	$(PYTHON) bench/targets.py

bench-deps:
	$(PYTHON) -m pip install -q -e '.[dev,bench]'
	command -v kcat >/dev/null || (apt-get update -qq && apt-get install -y -qq kcat)
	$(PYTHON) scripts/kafka_broker.py resolve

# Part 1 (+ part 4's 1M-conversation memory figure): engine alone at 1k, 100k, 1M open conversations.
bench-engine:
	$(PYTHON) bench/engine_bench.py --records $(ENGINE_RECORDS) --repeat $(REPEAT)

# Issue 15: the compiled core against the Python pipeline and an orjson round trip (CPU per record,
# ratio), at 1k and 100k open conversations with all three, at 1M without the Python pipeline (its
# state at 1M takes ~6 GiB beside the compiled core's).
# Issue 23: `stream-pairer pair` whole-command CPU per record against an orjson round trip of the same lines.
bench-pair:
	$(PYTHON) bench/pair_command.py --records $(PAIR_RECORDS) --conversations 10000 --repeat $(REPEAT)

bench-native:
	$(PYTHON) bench/native_bench.py --conversations 1000 100000 --records $(ENGINE_RECORDS) --repeat $(REPEAT)
	$(PYTHON) bench/native_bench.py --conversations 1000000 --records $(ENGINE_RECORDS) --repeat $(REPEAT) --variants orjson native

# Issue 15, item 4: output bytes per input byte for each --raw mode (README, Output size).
bench-output-size:
	$(PYTHON) bench/output_size.py

# Where the engine's time goes: stage costs and a pyinstrument tree (bench/results/engine_profile_K*.txt).
bench-profile:
	$(PYTHON) bench/engine_bench.py --conversations 1000 100000 --records $(ENGINE_RECORDS) --stages
	$(PYTHON) bench/engine_bench.py --conversations 100000 --records $(ENGINE_RECORDS) --repeat 1 --profile

# Parts 2 and 3: sidecar vs aiokafka and kcat passthroughs vs the Quix Streams peer, both delivery modes.
bench-e2e:
	$(PYTHON) bench/e2e.py --records $(RECORDS) --conversations $(CONVERSATIONS) --partitions $(PARTITIONS)

# Part 6: 1, 2, 4 partitions with as many processes (sidecar and the aiokafka passthrough), and
# 1, 2, 4 partitions read by one sidecar process.
bench-scaling:
	$(PYTHON) bench/e2e.py --records $(RECORDS) --conversations $(CONVERSATIONS) --scaling 1 2 4 --runners aiokafka sidecar
	$(PYTHON) bench/e2e.py --records $(RECORDS) --conversations $(CONVERSATIONS) --scaling 1 2 4 --single-process --runners sidecar

# Part 5: latency at half of the best sidecar rate measured by bench-e2e.
bench-latency:
	$(PYTHON) bench/latency.py --duration $(LATENCY_SECONDS)

# Part 4: memory soak at a steady rate with timeouts expiring, under a held-bytes bound.
bench-soak:
	$(PYTHON) bench/soak.py --duration $(SOAK_SECONDS)

# Part 4 (detail): bytes per open conversation by allocation site, against the held-bytes estimate.
bench-memory-breakdown:
	$(PYTHON) bench/memory_breakdown.py --conversations 20000
	$(PYTHON) bench/state_growth.py

bench-memory: bench-memory-breakdown bench-soak
