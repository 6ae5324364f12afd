-- shimmer store, schema 10: native call stacks as a tree of frames, each
-- (caller node, return address) stored once per process, as heaptrack's
-- trace stores them; stacks that share their outer frames share their
-- nodes.  stack_frames, a table of one row per frame until now, becomes a
-- view of the same shape over the tree.  docs/schema.md defines the columns.

CREATE TABLE IF NOT EXISTS stack_nodes (
	proc_id INTEGER NOT NULL,
	node_id INTEGER NOT NULL,
	parent_id INTEGER NOT NULL,
	pc INTEGER NOT NULL,
	PRIMARY KEY (proc_id, node_id)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS stacks (
	proc_id INTEGER NOT NULL,
	stack_id INTEGER NOT NULL,
	node_id INTEGER NOT NULL,
	PRIMARY KEY (proc_id, stack_id)
) WITHOUT ROWID;

-- An older store's frames: one node per frame (its stacks share none),
-- numbered within the process so that a frame's caller has the lower id.
CREATE TEMP TABLE stack_tree_old AS
SELECT proc_id, stack_id, level, pc,
	row_number() OVER (PARTITION BY proc_id ORDER BY stack_id, level DESC) AS node_id
FROM main.stack_frames;

INSERT INTO stack_nodes (proc_id, node_id, parent_id, pc)
SELECT f.proc_id, f.node_id, coalesce(c.node_id, 0), f.pc
FROM stack_tree_old f
LEFT JOIN stack_tree_old c ON c.proc_id = f.proc_id AND c.stack_id = f.stack_id
	AND c.level = f.level + 1;

INSERT INTO stacks (proc_id, stack_id, node_id)
SELECT proc_id, stack_id, node_id FROM stack_tree_old WHERE level = 0;

DROP TABLE stack_tree_old;
DROP TABLE main.stack_frames;

CREATE VIEW IF NOT EXISTS stack_frames AS
WITH RECURSIVE walk (proc_id, stack_id, level, pc, parent_id) AS (
	SELECT s.proc_id, s.stack_id, 0, n.pc, n.parent_id
	FROM stacks s JOIN stack_nodes n ON n.proc_id = s.proc_id AND n.node_id = s.node_id
	UNION ALL
	SELECT w.proc_id, w.stack_id, w.level + 1, n.pc, n.parent_id
	FROM walk w JOIN stack_nodes n ON n.proc_id = w.proc_id AND n.node_id = w.parent_id
	WHERE w.level < 1023
)
SELECT proc_id, stack_id, level, pc FROM walk;

INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', '10');
