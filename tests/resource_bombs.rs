//! Resource bombs (issue 12): SQL that a model — or a prompt injection speaking through one —
//! could send to make loom's sealed engine burn time or memory without bound. One real loom with
//! a fixture server, a realistic dataset, and for every bomb:
//!
//! - the answer is an `isError` result (or the clean outcome named for the bomb), and it comes
//!   back before a reference call that the fixture answers [`REFERENCE_AFTER`] past
//!   `queryTimeoutMs` (sent right after the bomb, and answered through the same gateway: an
//!   order of events, not a stopwatch, so a loaded machine delays both alike);
//! - a passthrough `tools/call` (`echo`) sent while the bomb runs is answered — and, when the
//!   bomb ran into `queryTimeoutMs` (the engine was busy with it the whole time), answered
//!   before the bomb: passthrough never waits for the engine;
//! - loom's CPU goes quiet after the answer (the work stopped, not only its answer);
//! - loom's peak RSS (`VmHWM`, reset before each bomb through `/proc/PID/clear_refs` where the
//!   kernel allows it) stays under [`RSS_CAP_MIB`].
//!
//! No check here is a speed claim (issue 35: "no timing asserts in tests"): where a wall clock
//! is read at all it is a hang guard ([`PATIENCE`] on top of every design bound), so that a
//! broken build fails instead of hanging CI. How fast the answers, the echo and the quiet come
//! is measured in `benches/bounds.rs` (figures in benches/README.md), and printed here.
//!
//! Finally loom must still be alive and answer a normal query exactly. Run with
//! `cargo test --test resource_bombs -- --nocapture` to see the table (bomb → outcome, wall
//! time, echo latency, settle time, peak RSS). `LOOM_BOMB=substring` runs only the bombs whose
//! name contains it (for investigating one).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

/// `queryTimeoutMs` of the loom under test.
const QUERY_TIMEOUT_MS: u64 = 3_000;
/// How long past `queryTimeoutMs` the reference call (the fixture's `slow`, sent right after each
/// bomb) sleeps before it answers. A bomb's answer must come back before it: a hung or runaway
/// bomb, or a timeout answer that waits for the engine to let go (the timer once ran on the
/// engine's own threads: answered at 23 s instead of 3 s), comes after it. Both answers travel
/// through loom's gateway, so a machine slow enough to delay one delays the other: this was a
/// wall-clock bound of 3 + 10 s, which a loaded 2-core CI machine could break on its own.
const REFERENCE_AFTER: Duration = Duration::from_secs(10);
/// `memoryBudgetBytes`: also the result cap in bytes.
const MEMORY_BUDGET: u64 = 64 << 20;
/// `engineMemoryLimit`: the engine's memory pool (joins, sorts, aggregations).
const ENGINE_MEMORY_LIMIT: u64 = 256 << 20;
/// Peak RSS loom may reach during any bomb, in MiB (1.5 GiB). What loom honestly needs: its
/// resident code and the two datasets (~110 MiB after start-up, debug build), the engine's pool
/// (256 MiB), what DataFusion holds outside the pool (batches in flight, build sides and
/// accumulators before they are accounted), and what the allocator keeps after a bomb. Measured
/// on the 2-core CI machine kind, debug build, over six runs of the suite: at most 768 MiB
/// (`count(DISTINCT)` or `string_agg` over a cross join, just before the pool refuses them),
/// ~450-560 MiB for most bombs. The runaways found while writing this suite reached 2.7 GiB to
/// past 6 GiB within seconds (see the ignored tests), so 1.5 GiB — twice the honest peak —
/// separates the two with room on both sides.
const RSS_CAP_MIB: u64 = 1536;
/// Above this RSS a watchdog kills loom at once, so that a bomb that gets through cannot take
/// the machine with it; the test then fails on the dead process.
const WATCHDOG_MIB: u64 = 6 * 1024;

/// Rows of the main dataset (`ds_crm_rows_1`), and of the second one (`ds_crm_orders_1`, an
/// orders table the size of a typical SQL tool result).
const USERS: u64 = 5_000;
const ORDERS: u64 = 842;
const U: &str = "ds_crm_rows_1";
const O: &str = "ds_crm_orders_1";

/// What a bomb must end in.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// An `isError` result whose text contains one of these.
    Error(&'static [&'static str]),
    /// A successful result, or an `isError` result containing one of these: bombs that may
    /// finish within the time (a linear-time regex, a long but flat expression) still have to
    /// answer on time, go quiet and stay within the RSS cap.
    SuccessOr(&'static [&'static str]),
}

const TIMEOUT: &str = "was cancelled (queryTimeoutMs)";
const REFUSED: &str = ": refused: ";
const ROW_CAP: &str = "rows; loom stopped reading it";
const BYTE_CAP: &str = "bytes (memoryBudgetBytes); loom stopped reading it";
const EXHAUSTED: &str = "Resources exhausted";
const VALUE_BOUND: &str = "loom allows at most";
const PARSE: &str = "the SQL does not parse";

struct Bomb {
    name: &'static str,
    tool: &'static str,
    sql: String,
    expect: Expect,
}

fn q(name: &'static str, sql: impl Into<String>, expect: Expect) -> Bomb {
    Bomb {
        name,
        tool: "loom_query",
        sql: sql.into(),
        expect,
    }
}

fn m(name: &'static str, sql: impl Into<String>, expect: Expect) -> Bomb {
    Bomb {
        name,
        tool: "loom_materialize",
        sql: sql.into(),
        expect,
    }
}

/// `WITH t0 AS (…), t1 AS (t0 joined to itself), …, tk …`: O(k) text, 2^k table references once
/// the CTEs are expanded.
fn cte_chain(levels: usize) -> String {
    let mut sql = format!("WITH t0 AS (SELECT id, name FROM {U})");
    for k in 1..=levels {
        let p = k - 1;
        sql.push_str(&format!(
            ", t{k} AS (SELECT a.id, a.name FROM t{p} a JOIN t{p} b ON a.id = b.id)"
        ));
    }
    sql.push_str(&format!(" SELECT count(*) AS n FROM t{levels}"));
    sql
}

/// `WITH l0 AS (<seed>), l1 AS (SELECT <step> AS s FROM l0), …, l24 … SELECT <last> FROM l24`:
/// `step` applied to `s` 24 times, one CTE level (one projection) at a time. With a step that
/// doubles its input, a 5 KB seed would become 80 GB.
fn doubling(seed: &str, step: &str, last: &str) -> String {
    let mut sql = format!("WITH l0 AS ({seed})");
    for k in 1..=24 {
        sql.push_str(&format!(", l{k} AS (SELECT {step} AS s FROM l{})", k - 1));
    }
    sql.push_str(&format!(" SELECT {last} AS n FROM l24"));
    sql
}

/// One row holding all the dataset's e-mail addresses joined (~110 KB), as `s`.
const EMAILS: &str = "SELECT string_agg(email, ',') AS s FROM ds_crm_rows_1";

/// A list of `n` items made by `item(i)` joined with `sep`.
fn list(n: usize, sep: &str, item: impl Fn(usize) -> String) -> String {
    (0..n).map(item).collect::<Vec<_>>().join(sep)
}

fn bombs() -> Vec<Bomb> {
    use Expect::*;
    let long_literal = "x".repeat(60_000);
    vec![
        // --- plan-size bombs: refused before planning (or cancelled while planning) ----------
        q(
            "CTE self-join chain, 10 levels",
            cte_chain(10),
            Error(&[REFUSED, TIMEOUT]),
        ),
        q(
            "CTE self-join chain, 20 levels",
            cte_chain(20),
            Error(&[REFUSED]),
        ),
        q(
            "CTE self-join chain, 28 levels",
            cte_chain(28),
            Error(&[REFUSED]),
        ),
        q(
            "CTE self-join chain, 8 levels (256 scans, under the cap)",
            cte_chain(8),
            SuccessOr(&[TIMEOUT, REFUSED]),
        ),
        // --- time bombs: refused as cross joins, or cancelled at queryTimeoutMs -------------
        q(
            "3-way cross join, sum",
            format!("SELECT sum(a.id + b.id + c.id) AS s FROM {U} a, {U} b, {U} c"),
            Error(&[REFUSED, TIMEOUT]),
        ),
        q(
            "6-way cross join, filtered count",
            format!(
                "SELECT count(*) AS n FROM {U} a, {U} b, {U} c, {U} d, {U} e, {U} f \
                 WHERE a.id + b.id + c.id + d.id + e.id + f.id = 7"
            ),
            Error(&[REFUSED, TIMEOUT]),
        ),
        q(
            "3-way join on a 3-valued key, sum (1.4e10 rows)",
            format!(
                "SELECT sum(a.id + b.id + c.id) AS s FROM {U} a JOIN {U} b ON a.plan = b.plan \
                 JOIN {U} c ON b.plan = c.plan"
            ),
            Error(&[TIMEOUT, EXHAUSTED]),
        ),
        q(
            "3-way join on a boolean, ORDER BY … LIMIT (top-k)",
            format!(
                "SELECT a.name, b.name, c.name FROM {U} a JOIN {U} b ON a.active = b.active \
                 JOIN {U} c ON c.active = b.active ORDER BY a.score * b.score - c.score DESC LIMIT 5"
            ),
            Error(&[TIMEOUT, EXHAUSTED]),
        ),
        q(
            "EXPLAIN ANALYZE of a 3-way key join",
            format!(
                "EXPLAIN ANALYZE SELECT sum(a.id * b.id * c.id) FROM {U} a JOIN {U} b \
                 ON a.plan = b.plan JOIN {U} c ON b.plan = c.plan"
            ),
            Error(&[TIMEOUT, EXHAUSTED]),
        ),
        q(
            "huge LIMIT/OFFSET over a 3-way key join",
            format!(
                "SELECT a.id FROM {U} a JOIN {U} b ON a.plan = b.plan JOIN {U} c \
                 ON b.plan = c.plan LIMIT 9223372036854775807 OFFSET 9223372036854775000"
            ),
            Error(&[TIMEOUT, EXHAUSTED]),
        ),
        q(
            "VALUES just under 64 KiB, cross-joined 3 ways",
            format!(
                "WITH v(x) AS (VALUES {}) SELECT count(*) AS n FROM v a, v b, v c \
                 WHERE a.x + b.x + c.x = 7",
                list(7_000, ",", |i| format!("({i})"))
            ),
            Error(&[REFUSED, TIMEOUT]),
        ),
        // --- result-size bombs: the result cap stops reading --------------------------------
        q(
            "SELECT * of a cross join",
            format!("SELECT * FROM {U} a CROSS JOIN {U} b"),
            Error(&[REFUSED, ROW_CAP, BYTE_CAP]),
        ),
        q(
            "SELECT * of a join on a 3-valued key",
            format!("SELECT a.*, b.email AS other FROM {U} a JOIN {U} b ON a.plan = b.plan"),
            Error(&[ROW_CAP, BYTE_CAP]),
        ),
        m(
            "loom_materialize of a cross join",
            format!("SELECT a.*, b.name AS other FROM {U} a, {U} b"),
            Error(&[REFUSED, ROW_CAP, BYTE_CAP]),
        ),
        m(
            "loom_materialize of a 3-way key join aggregate",
            format!(
                "SELECT sum(a.id * b.id + c.id) AS s FROM {U} a JOIN {U} b ON a.plan = b.plan \
                 JOIN {U} c ON b.plan = c.plan"
            ),
            Error(&[TIMEOUT, EXHAUSTED]),
        ),
        // --- memory bombs: the engine's pool, spilling, or the timeout ----------------------
        q(
            "ORDER BY over a cross join",
            format!("SELECT a.name || b.email AS k FROM {U} a, {U} b ORDER BY k DESC"),
            Error(&[REFUSED, EXHAUSTED, TIMEOUT, ROW_CAP, BYTE_CAP]),
        ),
        q(
            "GROUP BY over a cross join",
            format!(
                "SELECT a.email, b.email, count(*) AS n FROM {U} a, {U} b GROUP BY a.email, b.email"
            ),
            Error(&[REFUSED, EXHAUSTED, TIMEOUT, ROW_CAP, BYTE_CAP]),
        ),
        q(
            "string_agg over a cross join",
            format!("SELECT length(string_agg(a.email || b.email, ',')) AS n FROM {U} a, {U} b"),
            Error(&[REFUSED, EXHAUSTED, TIMEOUT]),
        ),
        q(
            "array_agg over a cross join",
            format!("SELECT cardinality(array_agg(a.name || b.name)) AS n FROM {U} a, {U} b"),
            Error(&[REFUSED, EXHAUSTED, TIMEOUT]),
        ),
        q(
            "count(DISTINCT) over a cross join",
            format!("SELECT count(DISTINCT a.email || b.email) AS n FROM {U} a, {U} b"),
            Error(&[REFUSED, EXHAUSTED, TIMEOUT]),
        ),
        // --- value builders: bounded by size from their actual arguments -------------------
        q(
            "repeat of a 60 KB literal × 100000",
            format!("SELECT length(repeat('{long_literal}', 100000)) AS n"),
            Error(&[VALUE_BOUND]),
        ),
        q(
            "repeat(column, 100000) per row",
            format!("SELECT sum(length(repeat(a.email, 100000))) AS n FROM {U} a, {O} b"),
            Error(&[VALUE_BOUND]),
        ),
        q(
            "rpad to 100000 per row",
            format!("SELECT sum(length(rpad(a.name, 100000, b.status))) AS n FROM {U} a, {O} b"),
            Error(&[VALUE_BOUND]),
        ),
        m(
            "loom_materialize of repeat(column, 100000) per row",
            format!("SELECT a.id, repeat(a.name || b.status, 100000) AS s FROM {U} a, {O} b"),
            Error(&[VALUE_BOUND]),
        ),
        q(
            "array_repeat(column, 100000) per row",
            format!("SELECT sum(cardinality(array_repeat(email, 100000))) AS n FROM {U}"),
            Error(&[VALUE_BOUND]),
        ),
        q(
            "range with a huge span",
            "SELECT cardinality(range(1, 9000000000000)) AS n",
            Error(&[REFUSED]),
        ),
        q(
            "generate_series with a column span",
            format!("SELECT sum(cardinality(generate_series(1, id * 1000000))) AS n FROM {U}"),
            Error(&[REFUSED]),
        ),
        q(
            "replace amplification, nested",
            format!(
                "SELECT sum(length(replace(replace(replace(replace(email, 'e', email), 'e', \
                 email), 'e', email), 'e', email))) AS n FROM {U}"
            ),
            Error(&[VALUE_BOUND]),
        ),
        q(
            "regexp_replace amplification",
            format!(
                "SELECT sum(length(regexp_replace(a.email, '', b.status || '{}', 'g'))) AS n \
                 FROM {U} a, {O} b",
                "y".repeat(5_000)
            ),
            Error(&[VALUE_BOUND]),
        ),
        // --- text bombs: size, nesting, long lists -----------------------------------------
        q(
            "SQL over 64 KiB (VALUES)",
            format!(
                "SELECT count(*) FROM (VALUES {}) v(x)",
                list(12_000, ",", |i| format!("({i})"))
            ),
            Error(&[REFUSED]),
        ),
        q(
            "10000 nested parentheses",
            format!("SELECT {}1{} AS x", "(".repeat(10_000), ")".repeat(10_000)),
            Error(&[PARSE]),
        ),
        q(
            "1000 nested subqueries",
            format!(
                "SELECT * FROM {}{U}{}",
                "(SELECT * FROM ".repeat(1_000),
                ") t".repeat(1_000)
            ),
            Error(&[PARSE]),
        ),
        q(
            "5000 nested NOTs",
            format!(
                "SELECT count(*) AS n FROM {U} WHERE {}active",
                "NOT ".repeat(5_000)
            ),
            Error(&[PARSE]),
        ),
        q(
            "IN list of 10000 literals over a join",
            format!(
                "SELECT count(*) AS n FROM {U} a, {O} b WHERE a.id + b.user_id IN ({})",
                list(10_000, ",", |i| (i * 3).to_string())
            ),
            SuccessOr(&[TIMEOUT, REFUSED]),
        ),
        q(
            "UNION ALL tower, 300 legs over the dataset",
            list(300, " UNION ALL ", |i| {
                format!("SELECT id + {i} AS x FROM {U}")
            }),
            Error(&[ROW_CAP, BYTE_CAP, TIMEOUT, REFUSED]),
        ),
        q(
            "300-term + chain",
            format!("SELECT {} AS s FROM {U}", list(300, " + ", |_| "id".into())),
            SuccessOr(&[REFUSED]),
        ),
        q(
            "10000-term + chain",
            format!(
                "SELECT {} AS s FROM {U}",
                list(10_000, " + ", |_| "id".into())
            ),
            SuccessOr(&[REFUSED]),
        ),
        q(
            "5000 OR predicates",
            format!(
                "SELECT count(*) AS n FROM {U} WHERE {}",
                list(5_000, " OR ", |i| format!("id = {i}"))
            ),
            SuccessOr(&[REFUSED]),
        ),
        // --- values built outside the pool by other means -----------------------------------
        q(
            "|| doubling a folded 5 KB constant",
            doubling("SELECT repeat('x', 5000) AS s", "s || s", "length(s)"),
            Error(&[VALUE_BOUND, EXHAUSTED, TIMEOUT, REFUSED]),
        ),
        q(
            "|| doubling a LargeUtf8",
            doubling(
                "SELECT arrow_cast(repeat('x', 5000), 'LargeUtf8') AS s",
                "s || s",
                "length(s)",
            ),
            Error(&[VALUE_BOUND, EXHAUSTED, TIMEOUT, REFUSED]),
        ),
        q(
            "|| doubling 110 KB of the dataset's text",
            doubling(EMAILS, "s || s", "length(s)"),
            Error(&[VALUE_BOUND, EXHAUSTED, TIMEOUT, REFUSED]),
        ),
        q(
            "concat() doubling every row",
            doubling(
                &format!("SELECT email AS s FROM {U}"),
                "concat(s, s)",
                "sum(length(s))",
            ),
            Error(&[VALUE_BOUND, EXHAUSTED, TIMEOUT, REFUSED]),
        ),
        q(
            "array_concat doubling every row",
            doubling(
                &format!("SELECT array_repeat(id, 100) AS s FROM {U}"),
                "array_concat(s, s)",
                "sum(cardinality(s))",
            ),
            Error(&[VALUE_BOUND, EXHAUSTED, TIMEOUT, REFUSED]),
        ),
        q(
            "folded generate_series copied into every row",
            format!("SELECT a.id, generate_series(1, 100000) AS s FROM {U} a"),
            Error(&[VALUE_BOUND, BYTE_CAP, TIMEOUT, REFUSED]),
        ),
        q(
            "folded repeat copied into every row",
            format!(
                "SELECT sum(length(s)) AS n FROM (SELECT a.id, repeat('x', 100000) AS s FROM {U} a) t"
            ),
            Error(&[VALUE_BOUND, BYTE_CAP, TIMEOUT, REFUSED]),
        ),
        q(
            "unnest of a folded generate_series per row",
            format!(
                "SELECT count(*) AS n FROM (SELECT unnest(generate_series(1, 100000)) AS x FROM {U}) t"
            ),
            Error(&[VALUE_BOUND, BYTE_CAP, TIMEOUT, REFUSED]),
        ),
        // --- regular expressions ------------------------------------------------------------
        q(
            "catastrophic-backtracking regex",
            format!(
                "SELECT count(*) AS n FROM {U} WHERE regexp_like(email || '{}!', '^(a+)+$')",
                "a".repeat(5_000)
            ),
            SuccessOr(&[]),
        ),
        q(
            "regex that compiles to gigabytes",
            format!(
                "SELECT count(*) AS n FROM {U} WHERE regexp_like(email, '((a{{100}}){{100}}){{100}}')"
            ),
            Error(&["CompiledTooBig", "size limit"]),
        ),
        // --- round 2 (issue 27): values built past the bounds, work past the timeout -------
        q(
            "make_array of 20,000 references to one list",
            format!(
                "WITH a AS (SELECT array_agg(id) AS l FROM {U}) SELECT cardinality(make_array({})) AS n FROM a",
                list(20_000, ",", |_| "l".into())
            ),
            Error(&[VALUE_BOUND]),
        ),
        q(
            "make_array of 20 references to one list, per row of a cross join",
            format!(
                "WITH a AS (SELECT array_agg(id) AS l FROM {U}) \
                 SELECT sum(cardinality(make_array({}))) AS n FROM a, {U}",
                list(20, ",", |_| "l".into())
            ),
            // One row per batch (the cross join's shape): each value is within the bounds, so
            // the timeout ends it — and the deadline stops the work with it (settle ≈ 0).
            Error(&[VALUE_BOUND, TIMEOUT]),
        ),
        q(
            "struct of many references to one list",
            format!(
                "WITH a AS (SELECT array_agg(id) AS l FROM {U}) SELECT count(struct({})) AS n FROM a",
                list(2_000, ",", |_| "l".into())
            ),
            Error(&[VALUE_BOUND]),
        ),
        q(
            "array_replace_all with a list replacement",
            format!(
                "WITH a AS (SELECT array_agg(make_array(0)) AS ll, array_agg(id) AS l FROM {U}) \
                 SELECT cardinality(array_replace_all(ll, make_array(0), l)) AS n FROM a"
            ),
            Error(&[VALUE_BOUND]),
        ),
        q(
            "to_char with a 10,000-directive format",
            format!(
                "SELECT max(length(to_char(created, '{}'))) AS n FROM {U}",
                "%Y".repeat(10_000)
            ),
            Error(&[VALUE_BOUND]),
        ),
        q(
            "array_agg over a whole-partition window frame",
            format!(
                "SELECT max(cardinality(l)) AS n FROM (SELECT array_agg(id) OVER \
                 (ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS l FROM {U}) t"
            ),
            Error(&[REFUSED]),
        ),
        q(
            "string_agg over a running window of a cross join",
            format!(
                "SELECT max(length(s)) AS n FROM (SELECT string_agg(a.name, ',') OVER \
                 (ORDER BY a.id, b.order_id) AS s FROM {U} a, {O} b WHERE b.order_id < 100008) t"
            ),
            Error(&[REFUSED]),
        ),
        q(
            "array_agg over a bounded window frame (allowed)",
            format!(
                "SELECT max(cardinality(l)) AS n FROM (SELECT array_agg(id) OVER \
                 (ORDER BY id ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS l FROM {U}) t"
            ),
            SuccessOr(&[]),
        ),
        q(
            "levenshtein of two 45 KB texts",
            format!(
                "WITH s AS (SELECT string_agg(name, '') AS t FROM {U}) \
                 SELECT levenshtein(t, reverse(t)) AS d FROM s"
            ),
            Error(&[VALUE_BOUND]),
        ),
        q(
            "GROUP BY CUBE of 14 expressions (16,384 grouping sets)",
            format!(
                "SELECT count(*) AS n FROM {U} GROUP BY CUBE({})",
                list(14, ", ", |i| format!("id % {}", i + 2))
            ),
            Error(&[REFUSED]),
        ),
        q(
            "GROUPING SETS crossed with ROLLUP (8 × 11 sets)",
            format!(
                "SELECT count(*) AS n FROM {U} GROUP BY CUBE(id % 2, id % 3, id % 5), ROLLUP({})",
                list(10, ", ", |i| format!("id % {}", i + 7))
            ),
            Error(&[REFUSED]),
        ),
        q(
            "GROUP BY CUBE of 4 expressions (allowed)",
            format!("SELECT count(*) AS n FROM {U} GROUP BY CUBE(id % 2, id % 3, id % 5, id % 7)"),
            SuccessOr(&[]),
        ),
        q(
            "array_has_all of a 4.2 M-element list against itself",
            format!(
                "SELECT array_has_all(l, l) AS b FROM \
                 (SELECT array_agg(a.id + b.order_id) AS l FROM {U} a, {O} b) s"
            ),
            Error(&[VALUE_BOUND]),
        ),
    ]
}

/// What a bomb came to.
struct Outcome {
    name: &'static str,
    tool: &'static str,
    text: String,
    is_error: bool,
    /// Send → answer, and echo sent → its answer: printed for the table, never asserted.
    wall: Duration,
    echo: Duration,
    /// The echo was sent while the bomb was still unanswered.
    echo_during: bool,
    /// The echo's answer arrived before the bomb's.
    echo_first: bool,
    /// The reference call (`queryTimeoutMs` + [`REFERENCE_AFTER`] in the fixture) was answered
    /// before the bomb.
    reference_first: bool,
    /// From the answer until loom's CPU went quiet; `None`: not within [`PATIENCE`].
    settle: Option<Duration>,
    rss_mib: u64,
    hwm_mib: u64,
}

/// `VmRSS` and `VmHWM` of `pid`, in KiB.
fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Reset `VmHWM` to the current RSS (Linux ≥ 4.0); false where the kernel does not allow it.
fn reset_peak(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

/// CPU time `pid` has used (all threads, user + system), in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state is field 3, utime field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Wait until `pid` is quiet: two 200 ms windows in a row with at most 2 ticks of CPU (10% of
/// one core at 100 Hz). Returns how long that took, or `None` if it did not happen by `limit`.
fn settle(pid: u32, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut quiet = 0;
    let mut last = cpu_ticks(pid)?;
    while start.elapsed() < limit {
        thread::sleep(Duration::from_millis(200));
        let now = cpu_ticks(pid)?;
        quiet = if now - last <= 2 { quiet + 1 } else { 0 };
        last = now;
        if quiet == 2 {
            return Some(start.elapsed().saturating_sub(Duration::from_millis(400)));
        }
    }
    None
}

/// Kills `pid` if its RSS passes [`WATCHDOG_MIB`].
struct Watchdog {
    stop: Arc<AtomicBool>,
    fired: Arc<AtomicBool>,
}

impl Watchdog {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let fired = Arc::new(AtomicBool::new(false));
        let (s, f) = (stop.clone(), fired.clone());
        thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                if let Some((rss, _)) = rss_kib(pid) {
                    if rss > WATCHDOG_MIB * 1024 {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(pid as i32),
                            nix::sys::signal::Signal::SIGKILL,
                        );
                        f.store(true, Ordering::Relaxed);
                        eprintln!("watchdog: loom reached {} MiB; killed it", rss / 1024);
                        return;
                    }
                } else {
                    return;
                }
                thread::sleep(Duration::from_millis(5));
            }
        });
        Self { stop, fired }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn start_loom() -> (tempfile::TempDir, RawClient) {
    let (dir, path) = write_config(&json!({
        "servers": [fixture_server("crm", &[])],
        "queryTimeoutMs": QUERY_TIMEOUT_MS,
        "memoryBudgetBytes": MEMORY_BUDGET,
        "engineMemoryLimit": ENGINE_MEMORY_LIMIT,
    }));
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    let users = envelope(&loom.call_tool("crm_rows", json!({"count": USERS})));
    assert_eq!(
        (users["ref"].as_str(), users["rows"].as_u64()),
        (Some(U), Some(USERS))
    );
    let orders = envelope(&loom.call_tool("crm_orders", json!({"count": ORDERS, "users": USERS})));
    assert_eq!(
        (orders["ref"].as_str(), orders["rows"].as_u64()),
        (Some(O), Some(ORDERS))
    );
    (dir, loom)
}

fn is_error(line: &Line) -> bool {
    line.value["result"]["isError"] == json!(true)
}

/// The failure message when loom closed its stdout during `bomb` (waiting a moment for the
/// process to go: an abort may still be writing its core).
fn died(loom: &RawClient, pid: u32, bomb: &Bomb) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    while pid_alive(pid) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    let stderr = loom.stderr_text();
    let last: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.trim_start().starts_with("at ") && !l.contains(" INFO "))
        .collect();
    format!(
        "bomb `{}` ({}): loom {} its stdout\nSQL: {:.300}\nstderr (last lines):\n{}",
        bomb.name,
        bomb.tool,
        if pid_alive(pid) {
            "is alive but closed"
        } else {
            "died and closed"
        },
        bomb.sql,
        last[last.len().saturating_sub(8)..].join("\n")
    )
}

/// Send `bomb` and the reference call, then (once the bomb has run for a moment, or answered)
/// an `echo`; wait for the bomb and the echo, noting the order in which the three answers came.
fn detonate(loom: &mut RawClient, pid: u32, bomb: &Bomb) -> Outcome {
    let mut arguments = json!({"sql": bomb.sql});
    if bomb.tool == "loom_materialize" {
        arguments["name"] = json!(format!("bomb_{}", pid));
    }
    let timeout = Duration::from_millis(QUERY_TIMEOUT_MS);
    // A hang guard, not a speed claim: every design bound (the timeout, the reference's sleep)
    // plus PATIENCE. A bomb unanswered by then is stuck, not slow.
    let hang_guard = timeout + REFERENCE_AFTER + PATIENCE;
    let sent = Instant::now();
    let bomb_id = loom.request(
        "tools/call",
        json!({"name": bomb.tool, "arguments": arguments}),
    );
    // The reference clock (see REFERENCE_AFTER): sent after the bomb, so it starts sleeping
    // after the bomb's timeout started counting. `steps: 0` sleeps in one piece, no progress.
    let reference_ms = u64::try_from((timeout + REFERENCE_AFTER).as_millis()).expect("ms");
    let reference_id = loom.request(
        "tools/call",
        json!({"name": "crm_slow", "arguments": {"ms": reference_ms, "steps": 0}}),
    );
    // Let the bomb get going (planning, first batches) before the passthrough call.
    let early = loom.response_within(&[bomb_id], Duration::from_millis(300));
    let answered_early = early.is_some();
    if early.is_none() && sent.elapsed() < Duration::from_millis(300) {
        // No answer and no waiting: loom closed its stdout.
        panic!("{}", died(loom, pid, bomb));
    }
    let (mut bomb_line, mut bomb_at, mut echo_at) = (None, None, None);
    let (mut echo_first, mut reference_first, mut reference_answered) = (false, false, false);
    if let Some(line) = early {
        bomb_line = Some(line);
        bomb_at = Some(sent.elapsed());
    }
    let echo_sent = Instant::now();
    let echo_id = loom.request(
        "tools/call",
        json!({"name": "crm_echo", "arguments": {"text": "still there?"}}),
    );
    while bomb_line.is_none() || echo_at.is_none() {
        let left = hang_guard.saturating_sub(sent.elapsed());
        let Some(line) = loom.response_within(&[bomb_id, echo_id, reference_id], left) else {
            if sent.elapsed() < hang_guard {
                panic!("{}", died(loom, pid, bomb));
            }
            panic!(
                "bomb `{}` ({}): no answer within {hang_guard:?}, the hang guard (echo answered: \
                 {})\nSQL: {:.300}",
                bomb.name,
                bomb.tool,
                echo_at.is_some(),
                bomb.sql,
            );
        };
        if line.value["id"] == json!(echo_id) {
            assert_eq!(first_text(&line), "still there?", "{}", line.raw);
            echo_at = Some(echo_sent.elapsed());
            echo_first = bomb_line.is_none();
        } else if line.value["id"] == json!(reference_id) {
            reference_answered = true;
            reference_first = bomb_line.is_none();
        } else {
            bomb_at = Some(sent.elapsed());
            bomb_line = Some(line);
        }
    }
    if !reference_answered {
        // Its job is done: stop the fixture's sleep rather than wait it out (an answer that
        // crosses the cancellation stays unclaimed in the client's queue, under its own id).
        loom.notify(
            "notifications/cancelled",
            json!({"requestId": reference_id, "reason": "the bomb was answered"}),
        );
    }
    let (line, wall, echo) = (
        bomb_line.expect("answered"),
        bomb_at.expect("answered"),
        echo_at.expect("answered"),
    );
    // How long the work went on after the answer is printed, not asserted; PATIENCE is only
    // the hang guard (a bomb whose work the deadline did not stop runs for minutes to hours:
    // the 3-way key joins stream 1.4e10 rows).
    let settle = settle(pid, PATIENCE);
    let (rss, hwm) = rss_kib(pid).unwrap_or((0, 0));
    Outcome {
        name: bomb.name,
        tool: bomb.tool,
        text: line.value["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or(&line.raw)
            .to_string(),
        is_error: is_error(&line),
        wall,
        echo,
        echo_during: !answered_early,
        echo_first,
        reference_first,
        settle,
        rss_mib: rss / 1024,
        hwm_mib: hwm / 1024,
    }
}

fn ms(d: Option<Duration>) -> String {
    d.map_or_else(|| "never".to_string(), |d| d.as_millis().to_string())
}

fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    flat.chars().take(max).collect()
}

/// Start loom, detonate `bombs` one after another, print the table, then check every bomb's
/// bounds and that loom still answers correctly.
fn run(bombs: Vec<Bomb>) {
    let (_dir, mut loom) = start_loom();
    let pid = loom.child.id();
    let watchdog = Watchdog::start(pid);
    let (rss0, _) = rss_kib(pid).expect("loom's /proc status");
    let can_reset = reset_peak(pid);
    eprintln!(
        "loom pid {pid}: RSS {} MiB after start-up and two datasets; VmHWM {}",
        rss0 / 1024,
        if can_reset {
            "reset before each bomb"
        } else {
            "cumulative (clear_refs refused)"
        }
    );
    let filter = std::env::var("LOOM_BOMB").ok();
    let mut outcomes = Vec::new();
    let mut failures = Vec::new();
    let timeout = Duration::from_millis(QUERY_TIMEOUT_MS);
    for bomb in bombs
        .iter()
        .filter(|b| filter.as_deref().is_none_or(|f| b.name.contains(f)))
    {
        if can_reset {
            reset_peak(pid);
        }
        let outcome = detonate(&mut loom, pid, bomb);
        eprintln!(
            "{:<55} {:>6} ms  echo {:>4} ms{}  settle {:>5} ms  RSS {:>4} / peak {:>4} MiB  {}",
            outcome.name,
            outcome.wall.as_millis(),
            outcome.echo.as_millis(),
            if outcome.echo_first { "*" } else { " " },
            ms(outcome.settle),
            outcome.rss_mib,
            outcome.hwm_mib,
            one_line(&outcome.text, 100)
        );
        let mut fail = |what: String| {
            failures.push(format!("`{}`: {what}\n  SQL: {:.300}", bomb.name, bomb.sql))
        };
        match bomb.expect {
            Expect::Error(fragments) => {
                if !outcome.is_error || !fragments.iter().any(|f| outcome.text.contains(f)) {
                    fail(format!(
                        "expected an error containing one of {fragments:?}, got {}: {:.300}",
                        if outcome.is_error { "error" } else { "success" },
                        outcome.text
                    ));
                }
                if !outcome.text.starts_with(bomb.tool) {
                    fail(format!(
                        "the error does not start with the tool's name: {:.200}",
                        outcome.text
                    ));
                }
            }
            Expect::SuccessOr(fragments) => {
                if outcome.is_error && !fragments.iter().any(|f| outcome.text.contains(f)) {
                    fail(format!(
                        "expected success or an error containing one of {fragments:?}, got: {:.300}",
                        outcome.text
                    ));
                }
            }
        }
        // Before: answered within queryTimeoutMs + 10 s of wall time. Now: before the reference
        // call the fixture answers 10 s past queryTimeoutMs, which went out right after the bomb
        // and comes back through the same gateway — the same catch (a runaway or a timeout
        // answer held up by the engine is later than it), without a stopwatch a loaded machine
        // can break.
        if outcome.reference_first {
            fail(format!(
                "answered after the reference call ({REFERENCE_AFTER:?} past queryTimeoutMs, \
                 sent after the bomb) came back: the bomb outlived its timeout ({:?})",
                outcome.wall
            ));
        }
        let timed_out = outcome.text.contains(TIMEOUT);
        // A timeout answer is caused by the timeout: it cannot come much sooner (a wrong unit
        // would). Half the timeout, not all of it, because the deadline inside the work reads
        // the system clock, which NTP may move. A lower bound: load only makes it later.
        if timed_out && outcome.wall < timeout / 2 {
            fail(format!(
                "a timeout answer after {:?}, before queryTimeoutMs ({timeout:?}) could fire",
                outcome.wall
            ));
        }
        // Before: the echo answered within 2 s. Now an order of events: a bomb that ran into the
        // timeout kept the engine busy from before the echo was sent until its answer, so an
        // echo answered after it waited for the engine (passthrough must not: SPEC §10.2).
        // Bombs that ended sooner may legitimately answer just before an echo sent 300 ms in,
        // so for them only the answer itself is required (the hang guard in `detonate`).
        if timed_out && outcome.echo_during && !outcome.echo_first {
            fail(format!(
                "the passthrough call sent while the bomb ran was answered only after the bomb's \
                 timeout ({:?} after it was sent): it waited for the engine",
                outcome.echo
            ));
        }
        // Before: loom quiet within queryTimeoutMs + 10 s of sending. Now a hang guard: quiet
        // within PATIENCE of the answer. A bomb the deadline and the abort both failed to stop
        // runs for minutes (every one that reaches the timeout has 1e10-row work behind it);
        // how soon the work stops is measured in benches/bounds.rs.
        if outcome.settle.is_none() {
            fail(format!(
                "loom was still busy {PATIENCE:?} after the answer (hang guard)"
            ));
        }
        if outcome.hwm_mib >= RSS_CAP_MIB {
            fail(format!(
                "peak RSS {} MiB (cap {RSS_CAP_MIB} MiB)",
                outcome.hwm_mib
            ));
        }
        outcomes.push(outcome);
        assert!(
            pid_alive(pid),
            "loom died during `{}`\nSQL: {:.300}\nstderr:\n{}",
            bomb.name,
            bomb.sql,
            loom.stderr_text()
        );
    }
    let fired = watchdog.fired.load(Ordering::Relaxed);
    drop(watchdog);
    assert!(
        !fired,
        "the watchdog killed loom (RSS over {WATCHDOG_MIB} MiB)"
    );

    // The table for benches/README.md.
    eprintln!(
        "\nanswer: send → answer; echo: a passthrough call sent 300 ms into the bomb (or after its \
         answer) → its answer (* = answered before the bomb); settle: answer → loom's CPU quiet; \
         peak: VmHWM during the bomb. Printed, not asserted: the order of events and the hang \
         guards are"
    );
    eprintln!(
        "\n| bomb | tool | outcome (first 100 chars) | answer ms | echo ms | settle ms | peak RSS MiB |"
    );
    eprintln!("|---|---|---|---|---|---|---|");
    for o in &outcomes {
        eprintln!(
            "| {} | {} | {} | {} | {}{} | {} | {} |",
            o.name,
            o.tool,
            one_line(&o.text, 100).replace('|', "\\|"),
            o.wall.as_millis(),
            o.echo.as_millis(),
            if o.echo_first { "*" } else { "" },
            ms(o.settle),
            o.hwm_mib
        );
    }
    let peak = outcomes.iter().map(|o| o.hwm_mib).max().unwrap_or(0);
    eprintln!(
        "\n{} bombs; highest peak RSS {peak} MiB (cap {RSS_CAP_MIB} MiB)\n",
        outcomes.len()
    );

    // Still alive, and still exact.
    assert!(pid_alive(pid), "loom died\nstderr:\n{}", loom.stderr_text());
    let out = query(
        &mut loom,
        &format!("SELECT count(*) AS n, sum(id) AS s FROM {U}"),
    );
    assert_eq!(
        out["rows"],
        json!([{"n": USERS, "s": USERS * (USERS - 1) / 2}]),
        "{out}"
    );
    let joined = query(
        &mut loom,
        &format!("SELECT count(*) AS n FROM {O} o JOIN {U} u ON o.user_id = u.id"),
    );
    assert_eq!(joined["rows"], json!([{"n": ORDERS}]), "{joined}");
    // Nothing a bomb started was kept: the two datasets are held, besides the implicit results
    // of bombs that succeeded.
    let held = loom.call_tool("loom_list_datasets", json!({}));
    let refs: Vec<String> = held.value["result"]["structuredContent"]["datasets"]
        .as_array()
        .expect("datasets")
        .iter()
        .filter(|d| d["implicit"] != json!(true))
        .filter_map(|d| d["ref"].as_str().map(str::to_string))
        .collect();
    assert_eq!(refs, [U, O], "{}", held.raw);
    let echo = loom.call_tool("crm_echo", json!({"text": "done"}));
    assert_eq!(first_text(&echo), "done");
    assert!(
        failures.is_empty(),
        "{} of {} bombs misbehaved:\n{}",
        failures.len(),
        outcomes.len(),
        failures.join("\n")
    );
}

#[test]
fn resource_bombs_end_on_time_within_memory_and_passthrough_answers() {
    let all = bombs();
    assert!(all.len() >= 20, "{} bombs", all.len());
    run(all);
}

// --- Bombs found while writing the suite (issues 12, 27) --------------------------------------
//
// Each runs alone on its own loom with the same checks as the suite above. They once misbehaved
// past the timeout (figures: debug build on the 2-core CI machine kind); the guard now refuses
// the first four before they run, so each asserts that refusal — and a heavy query the guard
// admits keeps the timeout path itself tested (issue 35). Run one with
// `cargo test --test resource_bombs NAME -- --nocapture`.

/// A UNION ALL of 2,000 constant SELECTs (43 KB; no table, so no cap on table references
/// applied) was answered at the timeout, but planning went on for ~18 s after the answer:
/// DataFusion's `optimize_unions` rule flattens the left-deep union tree, roughly quadratic in
/// the legs, synchronously (no await point at which the abort could stop it), holding a
/// `loom-engine` thread. Before the 64 MiB engine stacks it overflowed the 2 MiB stack in
/// sqlparser's `Spanned for SetExpr` and crashed loom. The guard now caps a query at 300
/// SELECTs, so this is refused before planning: it no longer reaches the timeout (that path is
/// [`a_heavy_query_the_guard_admits_ends_at_the_timeout`]'s).
#[test]
fn union_all_of_2000_constants() {
    run(vec![q(
        "UNION ALL tower, 2000 constant legs",
        list(2_000, " UNION ALL ", |i| format!("SELECT {i}")),
        Expect::Error(&[REFUSED]),
    )]);
}

/// The same with 999 SELECTs over the dataset (within the cap on table references): answered at
/// the timeout, planning busy until ~15-23 s after sending (500 legs: ~1 s). Refused now, like
/// the one above.
#[test]
fn union_all_of_999_dataset_legs() {
    run(vec![q(
        "UNION ALL tower, 999 legs over the dataset",
        list(999, " UNION ALL ", |i| {
            format!("SELECT id + {i} AS x FROM {U}")
        }),
        Expect::Error(&[REFUSED]),
    )]);
}

/// A window function over a 25M-row cross join: the sort under `row_number()` sorts what it
/// has buffered (up to the 256 MiB pool) in one synchronous call. The answer came at the
/// timeout (the timer runs on the gateway's runtime since this was found), but the sort kept
/// an engine thread busy until 3.5-23.5 s after sending (five of eight runs past 11 s). Since
/// the cross-join guard caps pairs at 10M, this query is refused before it runs.
#[test]
fn window_function_over_a_cross_join() {
    run(vec![q(
        "window function over a cross join",
        format!(
            "SELECT max(r) AS r FROM (SELECT row_number() OVER (PARTITION BY a.country \
             ORDER BY a.score, b.score) AS r FROM {U} a, {U} b) t"
        ),
        Expect::Error(&[REFUSED]),
    )]);
}

/// A cross join of 5,000 × 20,000 rows (100M pairs) under a filter no pair passes. The cross
/// join never returned to the runtime while it paired a batch with the other side, so the abort
/// at the timeout did not stop it, and with both `loom-engine` threads in it the timeout answer
/// itself waited (the timer ran on the engine's runtime then): answered after ~23 s instead of
/// 3 s. Passthrough calls were answered meanwhile. Refused now by the cross-join guard (10M
/// pairs at most), as is the 5,000 × 5,000 version, which was answered at 3 s but kept the
/// engine busy until 5-12 s after sending.
#[test]
fn hundred_million_pair_cross_join() {
    run(vec![q(
        "100M-pair cross join, filter no pair passes",
        format!(
            "SELECT count(*) AS n FROM {U} a, (SELECT email FROM {U} UNION ALL SELECT email \
             FROM {U} UNION ALL SELECT email FROM {U} UNION ALL SELECT email FROM {U}) b \
             WHERE a.email || b.email = 'x'"
        ),
        Expect::Error(&[REFUSED]),
    )]);
}

/// The timeout path, reached by a query every guard admits (issue 35: the bombs above that
/// tested it are refused before they run now). An equality join on a boolean pairs 5,000 rows
/// with 2,500 each: 12.5M pairs, within every bound, each paying a `levenshtein` of two ~50-
/// character texts, summed into one row. Its memory is the 5,000-row build side and one
/// accumulator (no pool refusal, no result cap); its work is ~10 minutes on one engine thread
/// of a debug build (1.25M pairs of single e-mails took 14 s; doubling them quadruples each
/// comparison) and still far past 3 s on a release build with many cores. So it can only end
/// one way: "was cancelled (queryTimeoutMs)" — and with the engine busy with it from start to
/// timeout, the run's order-of-events checks apply in full: the echo is answered before it, it
/// is answered before the reference call, and its work stops (the deadline inside it).
#[test]
fn a_heavy_query_the_guard_admits_ends_at_the_timeout() {
    run(vec![q(
        "12.5M-pair key join of levenshtein distances (admitted; ends at the timeout)",
        format!(
            "SELECT sum(levenshtein(a.email || a.email, b.email || b.email)) AS d \
             FROM {U} a JOIN {U} b ON a.active = b.active"
        ),
        Expect::Error(&[TIMEOUT]),
    )]);
}

/// Functions outside the bounded set that return more than they take, applied level after
/// level through a CTE chain (seed: the dataset's e-mails joined, 110 KB). Before the projection
/// output bound these reached 2.7 to 6+ GiB (`overlay`, `array_to_string`, `CAST` of an array:
/// each level references `s` twice, so each is its own projection and the output bound stops
/// the first value over 1 MiB); `encode` references `s` once, so the optimizer merges the chain
/// into one nested expression that no output check sees between steps — it is bounded as a
/// value builder itself.
#[test]
fn unbounded_builders_doubling() {
    let bomb = |name: &'static str, step: &str| {
        q(
            name,
            doubling(EMAILS, step, "length(s)"),
            Expect::Error(&[VALUE_BOUND, EXHAUSTED, TIMEOUT, REFUSED]),
        )
    };
    run(vec![
        bomb("overlay doubling", "overlay(s placing s from 1 for 0)"),
        bomb("encode(hex) doubling", "encode(s, 'hex')"),
        bomb(
            "array_to_string(make_array) doubling",
            "array_to_string(make_array(s, s), '')",
        ),
        bomb(
            "CAST(make_array AS VARCHAR) doubling",
            "CAST(make_array(s, s) AS VARCHAR)",
        ),
        // One reference to `s` per level: the optimizer merges the 24 levels into one nested
        // expression (each level triples the text: `s` → `[s, ...]` → `[[, s, ...`).
        bomb(
            "string_to_array → text, merged into one expression",
            "CAST(string_to_array(s, NULL) AS VARCHAR)",
        ),
        // The same from a constant: folded at planning time, step after step.
        q(
            "string_to_array → text, folded from a 5 KB constant",
            doubling(
                &format!("SELECT '{}' AS s", "x".repeat(5000)),
                "CAST(string_to_array(s, NULL) AS VARCHAR)",
                "length(s)",
            ),
            Expect::Error(&[VALUE_BOUND, EXHAUSTED, TIMEOUT, REFUSED]),
        ),
        // One step: 110,000 one-character elements joined by 60 KB each is 6.6 GB.
        q(
            "array_to_string with a 60 KB delimiter",
            format!(
                "SELECT length(array_to_string(string_to_array(s, NULL), '{}')) AS n \
                 FROM ({EMAILS})",
                "x".repeat(60_000)
            ),
            Expect::Error(&[VALUE_BOUND, EXHAUSTED, TIMEOUT, REFUSED]),
        ),
    ]);
}
