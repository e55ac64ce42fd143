-- One name for one thing across kinds: views over the three output tables (issue 26, item 6).
--
-- The records keep their contract (a pair has `call_ts`/`result_ts` and `call`/`result`, an orphan
-- `ts` and `event`, a dead letter `source` and `raw`: stream_pairer/schemas/), and these views give
-- every kind the same columns, so a query needs no hand-written union. Run after defining
-- `pairs`, `orphans` and `dead_letter` (tables from duckdb.sql, or views over the Parquet files):
--
--   CREATE VIEW pairs AS SELECT * FROM read_parquet('out/pairs.parquet');
--   CREATE VIEW orphans AS SELECT * FROM read_parquet('out/orphans.parquet');
--   CREATE VIEW dead_letter AS SELECT * FROM read_parquet('out/dead_letter.parquet');
--   .read deploy/warehouse/views.duckdb.sql
--
-- Checked by tests/warehouse/test_views.py on the outputs of examples/mixed.jsonl.

-- tool_outputs: one row per output record, every kind with the same columns.
--   ts        the record's event time: a pair's call (else its result), an orphan's event; NULL for a dead letter
--   call      the call side: a pair's `call`, an orphan_call's `event`
--   result    the result side: a pair's `result`, an orphan_result's `event`
--   source    where the record's (first) input event was read: a pair's call, an orphan's event, a dead letter's input
--   label     a pair's `match`, an orphan's or a dead letter's `reason`
CREATE OR REPLACE VIEW tool_outputs AS
SELECT kind, pair_id, match AS label, fifo_by, conversation_id, tool,
       coalesce(call_ts, result_ts) AS ts, call_ts, result_ts, latency_ms,
       call, result, call.source AS source,
       outcome, failure, failure_detail, failures,
       NULL::VARCHAR AS detail, NULL::BIGINT AS raw_bytes
FROM pairs
UNION ALL BY NAME
SELECT kind, NULL AS pair_id, reason AS label, NULL AS fifo_by, conversation_id, tool,
       ts,
       CASE WHEN kind = 'orphan_call' THEN ts END AS call_ts,
       CASE WHEN kind = 'orphan_result' THEN ts END AS result_ts,
       NULL AS latency_ms,
       CASE WHEN kind = 'orphan_call' THEN event END AS call,
       CASE WHEN kind = 'orphan_result' THEN event END AS result,
       source, outcome, failure, failure_detail, failures,
       NULL AS detail, NULL AS raw_bytes
FROM orphans
UNION ALL BY NAME
SELECT kind, NULL AS pair_id, reason AS label, NULL AS fifo_by, NULL AS conversation_id, NULL AS tool,
       NULL AS ts, NULL AS call_ts, NULL AS result_ts, NULL AS latency_ms,
       NULL AS call, NULL AS result, source,
       NULL AS outcome, NULL AS failure, NULL AS failure_detail, NULL AS failures,
       detail, raw_bytes
FROM dead_letter;

-- tool_events: one row per input tool event (a pair gives two, an orphan one), the event's side
-- under one set of names: `side` ('call' | 'result'), `ts` (the event's own time, else the
-- record's event time), `id`, `name`, `format`, `source`, `block`, `arguments`, `content`,
-- `is_error`; `output_kind` and `label` say how it ended. Its row count is the conservation
-- count: events in = events here.
CREATE OR REPLACE VIEW tool_events AS
SELECT 'call' AS side, kind AS output_kind, match AS label, pair_id, conversation_id, tool,
       coalesce(call.ts, call_ts) AS ts, call.id AS id, call.name AS name, call.format AS format,
       call.source AS source, call.block AS block, call.arguments AS arguments,
       NULL::JSON AS content, NULL::BOOLEAN AS is_error, latency_ms, outcome, failure
FROM pairs
UNION ALL
SELECT 'result', kind, match, pair_id, conversation_id, tool,
       coalesce(result.ts, result_ts), result.id, result.name, result.format,
       result.source, result.block, NULL, result.content, result.is_error, latency_ms, outcome, failure
FROM pairs
UNION ALL
SELECT CASE WHEN kind = 'orphan_call' THEN 'call' ELSE 'result' END, kind, reason, NULL, conversation_id, tool,
       coalesce(event.ts, ts), event.id, event.name, event.format,
       event.source, event.block, event.arguments, event.content, event.is_error, NULL, outcome, failure
FROM orphans;
