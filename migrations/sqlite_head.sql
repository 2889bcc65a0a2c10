-- qita board: the SQLite schema at revision 0019
CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);
CREATE TABLE runs (
	run_id VARCHAR(200) NOT NULL, 
	task_id VARCHAR(400), 
	experiment VARCHAR(400), 
	variant VARCHAR(400), 
	replicate INTEGER NOT NULL, 
	objective TEXT, 
	agent VARCHAR(400), 
	model VARCHAR(400), 
	schema_version VARCHAR(100), 
	source_format VARCHAR(20) NOT NULL, 
	started_at DATETIME, 
	ended_at DATETIME, 
	started_ts VARCHAR(100), 
	ended_ts VARCHAR(100), 
	last_seen_at DATETIME, 
	budget_max_steps INTEGER, 
	budget_max_runtime_s FLOAT, 
	budget_max_tokens BIGINT, 
	early_stop_enabled BOOLEAN NOT NULL, 
	has_start BOOLEAN NOT NULL, 
	has_end BOOLEAN NOT NULL, 
	closed BOOLEAN NOT NULL, 
	status VARCHAR(40), 
	stop_reason VARCHAR(200), 
	stop_reason_raw VARCHAR(200), 
	stop_detail TEXT, 
	final_result TEXT, 
	verdict VARCHAR(20), 
	verdict_recorded VARCHAR(20), 
	gated_on VARCHAR(20), 
	state VARCHAR(20) NOT NULL, 
	early_stopped BOOLEAN NOT NULL, 
	steps INTEGER NOT NULL, 
	retries INTEGER NOT NULL, 
	tokens_input BIGINT, 
	tokens_output BIGINT, 
	tokens_total BIGINT, 
	cost_usd FLOAT, 
	elapsed_s FLOAT, 
	id INTEGER NOT NULL, 
	critics JSON, 
	stop_criteria JSON, 
	tags JSON, 
	meta JSON, 
	start_record JSON, 
	end_record JSON, 
	failure_report JSON, 
	warnings JSON, 
	updated_at DATETIME, budget_max_cost_usd FLOAT, criteria_verdict VARCHAR(20), verdict_reason TEXT, source_status VARCHAR(100), score FLOAT, tokens_cache_read BIGINT, tokens_cache_write BIGINT, tool_calls INTEGER, agent_cost_usd FLOAT, agent_elapsed_s FLOAT, origin TEXT, origin_label TEXT, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_runs_early_stopped ON runs (early_stopped);
CREATE INDEX ix_runs_elapsed_s ON runs (elapsed_s);
CREATE INDEX ix_runs_experiment ON runs (experiment);
CREATE INDEX ix_runs_experiment_variant ON runs (experiment, variant);
CREATE INDEX ix_runs_model ON runs (model);
CREATE UNIQUE INDEX ix_runs_run_id ON runs (run_id);
CREATE INDEX ix_runs_started_at ON runs (started_at);
CREATE INDEX ix_runs_state ON runs (state);
CREATE INDEX ix_runs_steps ON runs (steps);
CREATE INDEX ix_runs_stop_reason ON runs (stop_reason);
CREATE INDEX ix_runs_task_id ON runs (task_id);
CREATE INDEX ix_runs_tokens_total ON runs (tokens_total);
CREATE INDEX ix_runs_variant ON runs (variant);
CREATE INDEX ix_runs_verdict ON runs (verdict);
CREATE TABLE criteria (
	id INTEGER NOT NULL, 
	run_pk INTEGER NOT NULL, 
	criterion_id VARCHAR(400) NOT NULL, 
	position INTEGER NOT NULL, 
	type TEXT, 
	description TEXT, 
	stop_when VARCHAR(20), 
	gating BOOLEAN NOT NULL, 
	pass_threshold FLOAT NOT NULL, 
	has_spec BOOLEAN NOT NULL, 
	has_result BOOLEAN NOT NULL, 
	score FLOAT, 
	passed BOOLEAN, 
	live_verdict VARCHAR(20), 
	decided_at_step INTEGER, 
	details JSON, 
	spec JSON, 
	result JSON, 
	PRIMARY KEY (id), 
	FOREIGN KEY(run_pk) REFERENCES runs (id) ON DELETE CASCADE, 
	CONSTRAINT uq_criteria_run_criterion UNIQUE (run_pk, criterion_id)
);
CREATE TABLE critic_outputs (
	id INTEGER NOT NULL, 
	run_pk INTEGER NOT NULL, 
	step INTEGER NOT NULL, 
	idx INTEGER NOT NULL, 
	critic TEXT, 
	action TEXT, 
	effective_action VARCHAR(20) NOT NULL, 
	reason TEXT, 
	score FLOAT, 
	details JSON, 
	PRIMARY KEY (id), 
	FOREIGN KEY(run_pk) REFERENCES runs (id) ON DELETE CASCADE, 
	CONSTRAINT uq_critic_outputs_run_step_idx UNIQUE (run_pk, step, idx)
);
CREATE TABLE early_stops (
	id INTEGER NOT NULL, 
	run_pk INTEGER NOT NULL, 
	reason TEXT, 
	deciding_criterion TEXT, 
	armed_criteria JSON, 
	step INTEGER, 
	tool_call_index INTEGER, 
	elapsed_s FLOAT, 
	turns_remaining INTEGER, 
	record JSON, 
	PRIMARY KEY (id), 
	FOREIGN KEY(run_pk) REFERENCES runs (id) ON DELETE CASCADE, 
	UNIQUE (run_pk)
);
CREATE TABLE events (
	id INTEGER NOT NULL, 
	run_pk INTEGER NOT NULL, 
	step INTEGER, 
	phase TEXT, 
	ok BOOLEAN, 
	ts VARCHAR(100), 
	digest VARCHAR(64) NOT NULL, 
	record TEXT, preview TEXT, 
	PRIMARY KEY (id), 
	FOREIGN KEY(run_pk) REFERENCES runs (id) ON DELETE CASCADE, 
	CONSTRAINT uq_events_run_digest UNIQUE (run_pk, digest)
);
CREATE INDEX ix_events_run_step ON events (run_pk, step);
CREATE TABLE run_tags (
	run_pk INTEGER NOT NULL, 
	tag VARCHAR(400) NOT NULL, 
	PRIMARY KEY (run_pk, tag), 
	FOREIGN KEY(run_pk) REFERENCES runs (id) ON DELETE CASCADE
);
CREATE INDEX ix_run_tags_tag ON run_tags (tag);
CREATE TABLE steps (
	id INTEGER NOT NULL, 
	run_pk INTEGER NOT NULL, 
	step INTEGER NOT NULL, 
	ts VARCHAR(100), 
	duration_s FLOAT, 
	tokens_input BIGINT, 
	tokens_output BIGINT, 
	tokens_total BIGINT, 
	cost_usd FLOAT, 
	retry BOOLEAN NOT NULL, 
	critic_action VARCHAR(20), 
	critic_score FLOAT, 
	record TEXT, preview TEXT, tool_calls INTEGER, 
	PRIMARY KEY (id), 
	FOREIGN KEY(run_pk) REFERENCES runs (id) ON DELETE CASCADE, 
	CONSTRAINT uq_steps_run_step UNIQUE (run_pk, step)
);
CREATE INDEX ix_runs_updated_at ON runs (updated_at);
CREATE INDEX ix_runs_experiment_started ON runs (experiment, started_at);
CREATE INDEX ix_steps_lane ON steps (run_pk, step, critic_action, critic_score, retry);
CREATE INDEX ix_runs_source_status ON runs (source_status);
CREATE TABLE uploads (
	id INTEGER NOT NULL, 
	created_at DATETIME, 
	files JSON, 
	source_keys JSON, 
	records BIGINT NOT NULL, report JSON, 
	PRIMARY KEY (id)
);
CREATE TABLE upload_runs (
	upload_id INTEGER NOT NULL, 
	run_pk INTEGER NOT NULL, 
	created BOOLEAN NOT NULL, 
	PRIMARY KEY (upload_id, run_pk), 
	FOREIGN KEY(run_pk) REFERENCES runs (id) ON DELETE CASCADE, 
	FOREIGN KEY(upload_id) REFERENCES uploads (id) ON DELETE CASCADE
);
CREATE INDEX ix_upload_runs_run_pk ON upload_runs (run_pk);
CREATE TABLE lab_decisions (
	run_pk INTEGER NOT NULL, 
	criterion_id VARCHAR(400) NOT NULL, 
	type VARCHAR(200), 
	polarities VARCHAR(20) NOT NULL, 
	reason TEXT, 
	verdict VARCHAR(20), 
	step INTEGER, 
	tool_call_index INTEGER, 
	pass_from_step INTEGER, 
	declared VARCHAR(20), 
	decide_within INTEGER, 
	gating BOOLEAN NOT NULL, 
	source VARCHAR(20), weight FLOAT, 
	PRIMARY KEY (run_pk, criterion_id), 
	FOREIGN KEY(run_pk) REFERENCES runs (id) ON DELETE CASCADE
);
CREATE TABLE lab_runs (
	run_pk INTEGER NOT NULL, 
	run_updated_at DATETIME, 
	indexed_at DATETIME, 
	first_step INTEGER, 
	step_count INTEGER NOT NULL, 
	series BLOB, 
	signatures JSON, 
	source VARCHAR(20), 
	error TEXT, gate_threshold FLOAT, 
	PRIMARY KEY (run_pk), 
	FOREIGN KEY(run_pk) REFERENCES runs (id) ON DELETE CASCADE
);
CREATE INDEX ix_lab_runs_indexed_at ON lab_runs (indexed_at);
CREATE TABLE run_search (
	id INTEGER NOT NULL, 
	run_pk INTEGER NOT NULL, 
	digest VARCHAR(16) NOT NULL, 
	text TEXT NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(run_pk) REFERENCES runs (id) ON DELETE CASCADE, 
	CONSTRAINT uq_run_search_run_digest UNIQUE (run_pk, digest)
);
CREATE TABLE "ingest_sources" (
	id INTEGER NOT NULL, 
	path TEXT NOT NULL, 
	kind VARCHAR(40) NOT NULL, 
	size BIGINT NOT NULL, 
	mtime FLOAT, 
	content_hash VARCHAR(64), 
	"offset" BIGINT NOT NULL, 
	lines BIGINT NOT NULL, 
	updated_at DATETIME, 
	PRIMARY KEY (id), 
	UNIQUE (path)
);
CREATE VIRTUAL TABLE run_search_fts USING fts5(text, content='run_search', content_rowid='id', tokenize='trigram', detail=none);
INSERT INTO run_search_fts(run_search_fts) VALUES ('rebuild');
CREATE TRIGGER run_search_fts_ad AFTER DELETE ON run_search BEGIN INSERT INTO run_search_fts(run_search_fts, rowid, text) VALUES ('delete', old.id, old.text); END;
