-- The queries tests/engines runs on every engine over a snapshot loom wrote (tests/integration/snapshot.rs
-- makes the session and loom query's answers). One statement per line; `[no-spark]` marks a query
-- over a table catalog.spark.sql leaves out (nanosecond timestamps Spark cannot read),
-- `[no-duckdb]` one over columns whose names differ only in case (DuckDB matches names
-- case-insensitively, so `"K"` reads `k`).
SELECT count(*) AS n, sum(score) AS total_score, min(created) AS first_created, max(created) AS last_created FROM ds_crm_rows_1
SELECT plan, count(*) AS n, sum(balance) AS balance, count(manager_id) AS managed FROM ds_crm_rows_1 GROUP BY plan ORDER BY plan
SELECT c.country, count(*) AS orders, sum(o.amount) AS amount FROM ds_shop_orders_1 o JOIN ds_crm_rows_1 c ON o.user_id = c.id GROUP BY c.country ORDER BY c.country
SELECT id, name, active, created, manager_id, tags FROM ds_crm_rows_1 WHERE id IN (0, 7, 2999) ORDER BY id
SELECT plan, n FROM ds_view_per_plan ORDER BY plan
SELECT k, n_u64, small, stamp, nothing, "count(*)" FROM ds_view_tricky ORDER BY k
[no-duckdb] SELECT k, "K" FROM ds_view_tricky ORDER BY k
[no-spark] SELECT k, at_fine FROM ds_view_fine ORDER BY k
SELECT count(*) AS errors, min(line_no) AS first, max(text) AS sample FROM doc_1 WHERE text LIKE 'ERROR%'
