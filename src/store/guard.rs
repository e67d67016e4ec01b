//! The plan guard: what `loom_query` (and `loom_materialize`, `loom query`) may run.
//!
//! SQL is planned, never executed, until the plan has passed three checks:
//! 1. DataFusion's own `SQLOptions` with DDL, DML and statements off (`CREATE`, `COPY`,
//!    `INSERT`, `SET`, `PREPARE` …);
//! 2. a walk over the whole plan, subqueries included, that admits only scans of loom's own
//!    datasets (a table function such as `range()` or `generate_series()` is a scan of something
//!    else) and refuses recursive CTEs (unbounded work);
//! 3. a walk over every expression that bounds the functions that can build huge values out of
//!    nothing (`repeat`, `lpad`, `rpad`, `array_repeat`, `range`, `generate_series`): their size
//!    arguments must be literals within [`MAX_BUILT_VALUE`], because such an allocation happens
//!    outside DataFusion's memory pool, in one step no timeout can interrupt.

use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::execution::context::SQLOptions;
use datafusion::logical_expr::{Expr, LogicalPlan};

/// The largest string or list a size-taking function may be asked to build.
pub(crate) const MAX_BUILT_VALUE: i64 = 100_000;

/// SQL text longer than this is refused before it is parsed (a model writes queries, not data:
/// a long `VALUES` list or a generated expression is how a query is made to allocate).
pub(crate) const MAX_SQL_BYTES: usize = 64 * 1024;

/// The size a statement may stand for — queries, table references and expressions — once every
/// CTE reference is expanded in place (which is what planning does): a CTE chain that joins each
/// level to itself doubles it at every level and would plan for minutes into gigabytes, and a
/// CTE with a large body referenced many times multiplies it (issue 12).
pub(crate) const MAX_EXPANDED_SIZE: u64 = 20_000;

/// How deep expressions may nest: planning recurses once per level (a chain of 250 `+` terms
/// overflowed a 2 MiB thread stack in a debug build; the engine's threads have
/// [`super::engine::STACK_BYTES`]).
pub(crate) const MAX_EXPRESSION_DEPTH: usize = 500;

/// Nodes a logical plan may have, subqueries included.
pub(crate) const MAX_PLAN_NODES: usize = 20_000;

/// Row pairs a join without an equality condition (a cross join, or a nested-loop join on an
/// inequality) may have to consider, by the engine's row counts of its inputs.
pub(crate) const MAX_JOIN_PAIRS: u128 = 10_000_000;

/// SELECTs a statement may stand for, CTE references expanded: the optimizer's work on a long
/// `UNION ALL` grows with the square of its legs (1,000 legs kept an engine thread busy for
/// 20 s), synchronously.
pub(crate) const MAX_SELECTS: usize = 300;

/// Grouping sets one SELECT may stand for once `CUBE`, `ROLLUP` and `GROUPING SETS` are expanded
/// (`CUBE` of n expressions is 2^n sets, `ROLLUP` n + 1, several multiply). The aggregation copies
/// every input row once per set before grouping, outside the engine's memory pool: `CUBE` of 14
/// columns took a 1 GiB-pool loom to 6.9 GB. 64 is a `CUBE` of 6 or a `ROLLUP` of 63.
pub(crate) const MAX_GROUPING_SETS: u64 = 64;

/// After physical planning: refuse a join that pairs every row with every row of inputs too
/// large for that. A key join, a filter or an aggregate first is what such a query needs.
pub(crate) fn check_physical(
    plan: &std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>,
) -> Result<(), Refusal> {
    let mut pending = vec![plan];
    while let Some(node) = pending.pop() {
        check_window_values(node.as_ref())?;
        if pairs_every_row(node.as_ref()) {
            let rows: Option<Vec<u128>> = node
                .children()
                .iter()
                .map(|c| row_bound(c.as_ref(), 0))
                .collect();
            if let Some(rows) = rows {
                let pairs = rows.iter().fold(1u128, |p, n| p.saturating_mul(*n));
                if pairs > MAX_JOIN_PAIRS {
                    let sides: Vec<String> = rows.iter().map(u128::to_string).collect();
                    return refuse(format!(
                        "a join without an equality condition would pair {} rows ({pairs} \
                         pairs, at most {MAX_JOIN_PAIRS}); join on a key, or filter or aggregate \
                         the inputs first",
                        sides.join(" × ")
                    ));
                }
            }
        }
        pending.extend(node.children());
    }
    Ok(())
}

/// What the values of one value-building window aggregate may hold in all, summed over the rows
/// it is computed for (256 MiB): each row gets a value built from its whole frame.
pub(crate) const MAX_WINDOW_VALUE_BYTES: u128 = 256 * 1024 * 1024;

/// Bytes one element of a window aggregate's value is counted as.
const WINDOW_ELEMENT_BYTES: u128 = 16;

/// Aggregates whose value holds every row of their input: as window functions each row gets a
/// copy of its whole frame, so `array_agg(id) OVER (ROWS BETWEEN UNBOUNDED PRECEDING AND
/// UNBOUNDED FOLLOWING)` over 40,000 rows is 40,000 lists of 40,000 elements (4 GB in 2.4 s),
/// built in one step outside the memory pool.
fn builds_from_frame(name: &str) -> bool {
    matches!(name, "array_agg" | "string_agg")
}

/// Refuse a window of a value-building aggregate whose rows × frame width could pass
/// [`MAX_WINDOW_VALUE_BYTES`]: the rows are the window input's bound, the frame a `ROWS` frame's
/// width when both ends are bounded, else every row.
fn check_window_values(node: &dyn datafusion::physical_plan::ExecutionPlan) -> Result<(), Refusal> {
    use datafusion::logical_expr::{WindowFrameBound, WindowFrameUnits};
    use datafusion::physical_expr::window::{PlainAggregateWindowExpr, SlidingAggregateWindowExpr};
    use datafusion::physical_plan::windows::{BoundedWindowAggExec, WindowAggExec};
    let (exprs, input) = if let Some(window) = node.downcast_ref::<BoundedWindowAggExec>() {
        (window.window_expr(), window.input())
    } else if let Some(window) = node.downcast_ref::<WindowAggExec>() {
        (window.window_expr(), window.input())
    } else {
        return Ok(());
    };
    let Some(rows) = row_bound(input.as_ref(), 0) else {
        return Ok(());
    };
    for expr in exprs {
        let any = expr.as_any();
        let name = if let Some(plain) = any.downcast_ref::<PlainAggregateWindowExpr>() {
            plain.get_aggregate_expr().fun().name().to_string()
        } else if let Some(sliding) = any.downcast_ref::<SlidingAggregateWindowExpr>() {
            sliding.get_aggregate_expr().fun().name().to_string()
        } else {
            continue;
        };
        if !builds_from_frame(&name) {
            continue;
        }
        let frame = expr.get_window_frame();
        let reach = |bound: &WindowFrameBound| -> Option<u128> {
            match bound {
                WindowFrameBound::CurrentRow => Some(0),
                WindowFrameBound::Preceding(n) | WindowFrameBound::Following(n) => {
                    if n.is_null() {
                        None
                    } else {
                        n.to_string().parse::<u128>().ok()
                    }
                }
            }
        };
        let width = match (
            frame.units,
            reach(&frame.start_bound),
            reach(&frame.end_bound),
        ) {
            (WindowFrameUnits::Rows, Some(start), Some(end)) => (start + end + 1).min(rows),
            _ => rows,
        };
        let bytes = rows
            .saturating_mul(width)
            .saturating_mul(WINDOW_ELEMENT_BYTES);
        if bytes > MAX_WINDOW_VALUE_BYTES {
            return refuse(format!(
                "`{name}` as a window function would build a value from up to {width} rows for \
                 each of {rows} rows (~{bytes} bytes, at most {MAX_WINDOW_VALUE_BYTES}); give it \
                 a frame like `ROWS BETWEEN 100 PRECEDING AND CURRENT ROW`, or aggregate with \
                 GROUP BY and join the result"
            ));
        }
    }
    Ok(())
}

fn pairs_every_row(node: &dyn datafusion::physical_plan::ExecutionPlan) -> bool {
    matches!(node.name(), "CrossJoinExec" | "NestedLoopJoinExec")
}

/// How many rows `node` can produce at most: the engine's exact count where it has one (loom's
/// datasets), the product of the inputs for joins that pair every row, the input's bound for
/// operators that never add rows; an estimate for key joins (the engine's, else the larger
/// input); `None` when unknown.
fn row_bound(node: &dyn datafusion::physical_plan::ExecutionPlan, depth: usize) -> Option<u128> {
    // A LIMIT (or any operator that stops after `fetch` rows) caps what comes out of it.
    let bound = unlimited_row_bound(node, depth);
    match (bound, node.fetch()) {
        (Some(bound), Some(fetch)) => Some(bound.min(fetch as u128)),
        (None, Some(fetch)) => Some(fetch as u128),
        (bound, None) => bound,
    }
}

fn unlimited_row_bound(
    node: &dyn datafusion::physical_plan::ExecutionPlan,
    depth: usize,
) -> Option<u128> {
    use datafusion::common::stats::Precision;
    use datafusion::physical_plan::{StatisticsArgs, StatisticsContext};
    // Plans are bounded in size (MAX_PLAN_NODES); depth only guards the stack.
    if depth > 256 {
        return None;
    }
    let stats = StatisticsContext::new()
        .compute(node, &StatisticsArgs::new())
        .ok();
    let rows = stats.as_ref().map(|s| s.num_rows);
    if let Some(Precision::Exact(n)) = rows {
        return Some(n as u128);
    }
    let children = node.children();
    let bounds = || -> Option<Vec<u128>> {
        children
            .iter()
            .map(|c| row_bound(c.as_ref(), depth + 1))
            .collect()
    };
    if pairs_every_row(node) {
        return bounds().map(|b| b.iter().fold(1u128, |p, n| p.saturating_mul(*n)));
    }
    match node.name() {
        "HashJoinExec" | "SortMergeJoinExec" | "SymmetricHashJoinExec" => match rows {
            Some(Precision::Inexact(n)) => Some(n as u128),
            _ => bounds().and_then(|b| b.into_iter().max()),
        },
        "UnionExec" | "InterleaveExec" => {
            bounds().map(|b| b.iter().fold(0u128, |s, n| s.saturating_add(*n)))
        }
        "UnnestExec" => None,
        _ if children.len() == 1 => row_bound(children[0].as_ref(), depth + 1),
        _ => match rows {
            Some(Precision::Inexact(n)) => Some(n as u128),
            _ => None,
        },
    }
}

/// Why a statement was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

fn refuse<T>(reason: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal(reason.into()))
}

/// Before planning: exactly one statement, and a query. Planning some statements already does
/// work (`COPY` resolves its target format), and the refusal should name what was asked.
pub(crate) fn check_statement(sql: &str) -> Result<(), Refusal> {
    use datafusion::sql::parser::{DFParser, Statement};
    use datafusion::sql::sqlparser::ast::Statement as Sql;
    if sql.len() > MAX_SQL_BYTES {
        return refuse(format!(
            "the SQL is {} bytes long; loom takes at most {MAX_SQL_BYTES} (query the datasets \
             instead of writing data into the statement)",
            sql.len()
        ));
    }
    let statements = DFParser::parse_sql(sql).map_err(|e| {
        Refusal(format!(
            "the SQL does not parse: {}",
            strip_prefix(&e.to_string())
        ))
    })?;
    let mut statements = statements.into_iter();
    let (Some(first), None) = (statements.next(), statements.next()) else {
        return refuse("exactly one statement per query (no `;`-separated batches)");
    };
    let kind = match &first {
        Statement::Statement(statement) => match statement.as_ref() {
            Sql::Query(_) => return check_expansion(statement),
            other => other
                .to_string()
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_uppercase(),
        },
        Statement::CreateExternalTable(_) => "CREATE EXTERNAL TABLE".to_string(),
        Statement::CopyTo(_) => "COPY".to_string(),
        // EXPLAIN shows a plan; the plan it explains is walked like any query.
        Statement::Explain(explain) if matches!(explain.statement.as_ref(), Statement::Statement(s) if matches!(s.as_ref(), Sql::Query(_))) =>
        {
            return match explain.statement.as_ref() {
                Statement::Statement(statement) => check_expansion(statement),
                _ => Ok(()),
            };
        }
        Statement::Explain(_) => "EXPLAIN of a non-query".to_string(),
        Statement::Reset(_) => "RESET".to_string(),
    };
    refuse(format!(
        "only read-only queries are allowed (SELECT, WITH … SELECT, VALUES); `{kind}` is not"
    ))
}

/// Refuse a statement whose CTE references expand to more than [`MAX_EXPANDED_SIZE`] parts,
/// or whose expressions nest deeper than [`MAX_EXPRESSION_DEPTH`], before the planner (which
/// does that expansion, and recurses that deep) sees it.
fn check_expansion(statement: &datafusion::sql::sqlparser::ast::Statement) -> Result<(), Refusal> {
    let measured = measure(statement);
    if let Some(kind) = measured.writes {
        return refuse(format!(
            "only read-only queries are allowed (SELECT, WITH … SELECT, VALUES); `{kind}` inside \
             a query is not"
        ));
    }
    if measured.depth > MAX_EXPRESSION_DEPTH {
        return refuse(format!(
            "expressions nest {} levels deep (at most {MAX_EXPRESSION_DEPTH}); write a long chain \
             of `OR x = …` as `x IN (…)`, and split long `+` or `||` chains",
            measured.depth
        ));
    }
    // Only what expansion adds is limited here: a long statement without CTE references is
    // bounded by its text (MAX_SQL_BYTES) and may be long (an `IN` list of thousands).
    if measured.size > MAX_EXPANDED_SIZE && measured.size > measured.written {
        return refuse(format!(
            "the query stands for {} parts (queries, table references and expressions) once its \
             CTEs are expanded (at most {MAX_EXPANDED_SIZE}); a CTE used twice at every level \
             doubles its work at every level — materialize an intermediate result with \
             loom_materialize instead",
            if measured.size == u64::MAX {
                "astronomically many".to_string()
            } else {
                measured.size.to_string()
            }
        ));
    }
    if measured.grouping_sets > MAX_GROUPING_SETS {
        return refuse(format!(
            "a GROUP BY stands for {} grouping sets once CUBE/ROLLUP/GROUPING SETS are expanded \
             (at most {MAX_GROUPING_SETS}: each set copies every row); group by fewer columns, or \
             run one query per level",
            if measured.grouping_sets == u64::MAX {
                "astronomically many".to_string()
            } else {
                measured.grouping_sets.to_string()
            }
        ));
    }
    if measured.selects > MAX_SELECTS {
        return refuse(format!(
            "the query has {} SELECTs (at most {MAX_SELECTS}); a long UNION ALL of constants or \
             copies is better written as one SELECT over VALUES or over a dataset",
            measured.selects
        ));
    }
    Ok(())
}

/// What [`measure`] finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Measured {
    /// Queries, table references and expressions, with every CTE reference counted as the
    /// CTE's own size.
    pub size: u64,
    /// The same parts counted as written: every CTE reference 1, every CTE body once.
    pub written: u64,
    /// The deepest nesting of expressions.
    pub depth: usize,
    /// SELECTs, with every CTE reference counted as the CTE's own (a set operation adds one
    /// per leg; planning copies a CTE into each reference).
    pub selects: usize,
    /// The most grouping sets one SELECT's `GROUP BY` stands for (1 for a plain one).
    pub grouping_sets: u64,
    /// A data-modifying statement inside the query (`WITH x AS (…) INSERT …`, a `DELETE … RETURNING`
    /// CTE), by its keyword.
    pub writes: Option<&'static str>,
}

/// Measure a parsed statement. Scopes are kept as SQL keeps them: a CTE is visible in the rest
/// of its `WITH`, in its query's body and in everything nested there, and a name defined in one
/// subquery does not leak into a sibling. A CTE's body is counted where it is referenced, never
/// where it is written.
pub(crate) fn measure(statement: &datafusion::sql::sqlparser::ast::Statement) -> Measured {
    use datafusion::sql::sqlparser::ast::{Expr, ObjectName, Query, Visit, Visitor};
    use std::ops::ControlFlow;

    struct Frame {
        /// CTEs of this query's `WITH` measured so far: name, size, SELECTs.
        ctes: Vec<(String, u64, usize)>,
        /// The bodies of this query's CTEs, by address, with their names.
        bodies: Vec<(*const Query, String)>,
        /// Set when this frame is a CTE body: the name it defines in its parent.
        defines: Option<String>,
        size: u64,
        selects: usize,
    }

    #[derive(Default)]
    struct Measure {
        frames: Vec<Frame>,
        top: u64,
        written: u64,
        writes: Option<&'static str>,
        selects: usize,
        depth: usize,
        deepest: usize,
        grouping_sets: u64,
    }

    /// Grouping sets one `GROUP BY` item stands for: a plain expression 1.
    fn grouping_sets_of(expr: &Expr) -> u64 {
        match expr {
            Expr::Cube(sets) => u32::try_from(sets.len())
                .ok()
                .and_then(|n| 1u64.checked_shl(n))
                .filter(|_| sets.len() < 64)
                .unwrap_or(u64::MAX),
            Expr::Rollup(sets) => (sets.len() as u64).saturating_add(1),
            Expr::GroupingSets(sets) => sets
                .iter()
                .map(|set| {
                    set.iter()
                        .map(grouping_sets_of)
                        .fold(1u64, u64::saturating_mul)
                })
                .fold(0u64, u64::saturating_add),
            Expr::Nested(inner) => grouping_sets_of(inner),
            _ => 1,
        }
    }

    // Names as DataFusion resolves them: an unquoted identifier is lowercased, a quoted one
    // (`"N"`, `` `N` ``, `[N]`) kept as written.
    fn ident_key(ident: &datafusion::sql::sqlparser::ast::Ident) -> String {
        match ident.quote_style {
            Some(_) => ident.value.clone(),
            None => ident.value.to_lowercase(),
        }
    }

    fn key(name: &ObjectName) -> String {
        name.0
            .last()
            .and_then(|part| part.as_ident())
            .map(ident_key)
            .unwrap_or_default()
    }

    impl Measure {
        fn add(&mut self, amount: u64) {
            match self.frames.last_mut() {
                Some(frame) => frame.size = frame.size.saturating_add(amount),
                None => self.top = self.top.saturating_add(amount),
            }
        }

        fn add_selects(&mut self, amount: usize) {
            match self.frames.last_mut() {
                Some(frame) => frame.selects = frame.selects.saturating_add(amount),
                None => self.selects = self.selects.saturating_add(amount),
            }
        }
    }

    impl Visitor for Measure {
        type Break = ();

        fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
            use datafusion::sql::sqlparser::ast::SetExpr;
            let writes = match query.body.as_ref() {
                SetExpr::Insert(_) => Some("INSERT"),
                SetExpr::Update(_) => Some("UPDATE"),
                SetExpr::Delete(_) => Some("DELETE"),
                SetExpr::Merge(_) => Some("MERGE"),
                _ => None,
            };
            self.writes = self.writes.or(writes);
            let address: *const Query = query;
            let defines = self.frames.last().and_then(|parent| {
                parent
                    .bodies
                    .iter()
                    .find(|(body, _)| *body == address)
                    .map(|(_, name)| name.clone())
            });
            let bodies = query
                .with
                .iter()
                .flat_map(|with| &with.cte_tables)
                .map(|cte| {
                    let body: *const Query = cte.query.as_ref();
                    (body, ident_key(&cte.alias.name))
                })
                .collect();
            self.frames.push(Frame {
                ctes: Vec::new(),
                bodies,
                defines,
                size: 1,
                selects: 0,
            });
            self.written = self.written.saturating_add(1);
            ControlFlow::Continue(())
        }

        fn post_visit_query(&mut self, _query: &Query) -> ControlFlow<()> {
            let Some(frame) = self.frames.pop() else {
                return ControlFlow::Continue(());
            };
            match (frame.defines, self.frames.last_mut()) {
                (Some(name), Some(parent)) => {
                    parent.ctes.push((name, frame.size.max(1), frame.selects))
                }
                _ => {
                    self.add(frame.size);
                    self.add_selects(frame.selects);
                }
            }
            ControlFlow::Continue(())
        }

        fn pre_visit_relation(&mut self, relation: &ObjectName) -> ControlFlow<()> {
            let name = key(relation);
            let (size, selects) = self
                .frames
                .iter()
                .rev()
                .find_map(|frame| {
                    frame
                        .ctes
                        .iter()
                        .rev()
                        .find(|(cte, _, _)| *cte == name)
                        .map(|(_, size, selects)| (*size, *selects))
                })
                .unwrap_or((1, 0));
            self.add(size);
            self.add_selects(selects);
            self.written = self.written.saturating_add(1);
            ControlFlow::Continue(())
        }

        fn pre_visit_select(
            &mut self,
            select: &datafusion::sql::sqlparser::ast::Select,
        ) -> ControlFlow<()> {
            use datafusion::sql::sqlparser::ast::GroupByExpr;
            self.add_selects(1);
            if let GroupByExpr::Expressions(items, _) = &select.group_by {
                let sets = items
                    .iter()
                    .map(grouping_sets_of)
                    .fold(1u64, u64::saturating_mul);
                self.grouping_sets = self.grouping_sets.max(sets);
            }
            ControlFlow::Continue(())
        }

        fn pre_visit_expr(&mut self, _expr: &Expr) -> ControlFlow<()> {
            self.add(1);
            self.written = self.written.saturating_add(1);
            self.depth += 1;
            self.deepest = self.deepest.max(self.depth);
            ControlFlow::Continue(())
        }

        fn post_visit_expr(&mut self, _expr: &Expr) -> ControlFlow<()> {
            self.depth = self.depth.saturating_sub(1);
            ControlFlow::Continue(())
        }
    }

    let mut measured = Measure::default();
    let _ = statement.visit(&mut measured);
    Measured {
        size: measured.top,
        written: measured.written,
        depth: measured.deepest,
        selects: measured.selects,
        grouping_sets: measured.grouping_sets.max(1),
        writes: measured.writes,
    }
}

/// The options every guarded plan must satisfy.
pub(crate) fn sql_options() -> SQLOptions {
    SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false)
}

/// Functions whose size arguments are bounded, and which argument positions hold sizes.
fn size_arguments(function: &str) -> Option<&'static [usize]> {
    match function {
        "repeat" | "lpad" | "rpad" | "array_repeat" | "array_resize" | "list_resize" => Some(&[1]),
        "range" | "generate_series" => Some(&[0, 1, 2]),
        _ => None,
    }
}

fn literal_int(expr: &Expr) -> Option<i64> {
    let mut expr = expr;
    // Casts of literals are how the planner types `repeat('a', 3)`.
    loop {
        match expr {
            Expr::Cast(cast) => expr = &cast.expr,
            Expr::TryCast(cast) => expr = &cast.expr,
            _ => break,
        }
    }
    match expr {
        Expr::Literal(value, _) => match value {
            ScalarValue::Int8(Some(v)) => Some(i64::from(*v)),
            ScalarValue::Int16(Some(v)) => Some(i64::from(*v)),
            ScalarValue::Int32(Some(v)) => Some(i64::from(*v)),
            ScalarValue::Int64(Some(v)) => Some(*v),
            ScalarValue::UInt8(Some(v)) => Some(i64::from(*v)),
            ScalarValue::UInt16(Some(v)) => Some(i64::from(*v)),
            ScalarValue::UInt32(Some(v)) => Some(i64::from(*v)),
            ScalarValue::UInt64(Some(v)) => i64::try_from(*v).ok(),
            _ => None,
        },
        Expr::Negative(inner) => literal_int(inner).and_then(i64::checked_neg),
        _ => None,
    }
}

/// The most centroids an approximate percentile may be asked to keep (the engine's default is
/// 100): the count is allocated up front, and `i64::MAX` of them is a capacity overflow.
pub(crate) const MAX_CENTROIDS: i64 = 10_000;

/// Where an aggregate's centroid count is among its arguments (the value, [the weight,] the
/// percentile, then the count).
fn centroids_position(name: &str) -> Option<usize> {
    match name {
        "approx_percentile_cont" => Some(2),
        "approx_percentile_cont_with_weight" => Some(3),
        _ => None,
    }
}

fn check_expression(expr: &Expr) -> Result<(), Refusal> {
    // Sizes multiply when such calls meet in one expression (`array_repeat(array_repeat(1, n),
    // n)`, `replace(repeat('a', n), 'a', repeat('b', n))`): one per expression, never more.
    let mut size_calls = 0;
    let _ = expr.apply(|e| {
        if let Expr::ScalarFunction(call) = e
            && size_arguments(call.func.name()).is_some()
        {
            size_calls += 1;
        }
        Ok(TreeNodeRecursion::Continue)
    });
    if size_calls > 1 {
        return refuse(
            "at most one of repeat/lpad/rpad/array_repeat/array_resize/range per expression in \
             loom (their sizes multiply)",
        );
    }
    let mut outcome = Ok(());
    let _ = expr.apply(|e| {
        if let Expr::AggregateFunction(call) = e
            && let Some(position) = centroids_position(call.func.name())
            && call
                .params
                .args
                .get(position)
                .and_then(literal_int)
                .is_some_and(|n| !(1..=MAX_CENTROIDS).contains(&n))
        {
            outcome = refuse(format!(
                "`{}` takes at most {MAX_CENTROIDS} centroids in loom (and at least 1)",
                call.func.name()
            ));
            return Ok(TreeNodeRecursion::Stop);
        }
        if let Expr::ScalarFunction(call) = e {
            let name = call.func.name();
            if let Some(positions) = size_arguments(name) {
                let sizes: Vec<Option<i64>> = positions
                    .iter()
                    .filter_map(|p| call.args.get(*p))
                    .map(literal_int)
                    .collect();
                if sizes.iter().any(Option::is_none) {
                    outcome = refuse(format!(
                        "`{name}` is only allowed with literal sizes in loom (at most \
                         {MAX_BUILT_VALUE}): it builds values outside the engine's memory limit"
                    ));
                    return Ok(TreeNodeRecursion::Stop);
                }
                let sizes: Vec<i64> = sizes.into_iter().flatten().collect();
                let too_big = match name {
                    // range(start, stop[, step]) / range(stop): the span bounds the length.
                    "range" | "generate_series" => {
                        let span = match sizes.as_slice() {
                            [stop] => stop.saturating_abs(),
                            [start, stop, ..] => stop.saturating_sub(*start).saturating_abs(),
                            [] => 0,
                        };
                        let step = sizes.get(2).copied().unwrap_or(1).saturating_abs().max(1);
                        span / step > MAX_BUILT_VALUE
                    }
                    _ => sizes.iter().any(|s| *s > MAX_BUILT_VALUE),
                };
                if too_big {
                    outcome = refuse(format!(
                        "`{name}` would build a value of more than {MAX_BUILT_VALUE} elements or \
                         characters; loom refuses it"
                    ));
                    return Ok(TreeNodeRecursion::Stop);
                }
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    outcome
}

/// Check a planned statement. `is_dataset` says whether a table name is a loom dataset. Returns
/// the datasets the plan reads.
pub(crate) fn check(
    plan: &LogicalPlan,
    is_dataset: &dyn Fn(&str) -> bool,
) -> Result<Vec<String>, Refusal> {
    sql_options().verify_plan(plan).map_err(|e| {
        Refusal(format!(
            "only read-only queries are allowed: {}",
            strip_prefix(&e.to_string())
        ))
    })?;
    let mut nodes = 0usize;
    let _ = plan.apply_with_subqueries(|_| {
        nodes += 1;
        Ok(if nodes > MAX_PLAN_NODES {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    if nodes > MAX_PLAN_NODES {
        return refuse(format!(
            "the query's plan has more than {MAX_PLAN_NODES} nodes; split it, or materialize an \
             intermediate result with loom_materialize"
        ));
    }
    let mut outcome = Ok(());
    let mut scanned = Vec::new();
    let _ = plan.apply_with_subqueries(|node| {
        let verdict = match node {
            LogicalPlan::TableScan(scan) => {
                let name = scan.table_name.table();
                let qualified_elsewhere = scan
                    .table_name
                    .schema()
                    .is_some_and(|schema| schema != "public");
                if !qualified_elsewhere && is_dataset(name) {
                    scanned.push(name.to_string());
                    Ok(())
                } else {
                    refuse(format!(
                        "`{}` is not a loom dataset; only datasets listed by loom_list_datasets \
                         can be queried (no files, URLs or table functions)",
                        scan.table_name
                    ))
                }
            }
            LogicalPlan::RecursiveQuery(_) => {
                refuse("recursive CTEs are not allowed in loom (their work is unbounded)")
            }
            LogicalPlan::Extension(_) => refuse("this kind of statement is not allowed in loom"),
            LogicalPlan::Ddl(_)
            | LogicalPlan::Dml(_)
            | LogicalPlan::Copy(_)
            | LogicalPlan::Statement(_) => refuse("only read-only queries are allowed"),
            other => other.expressions().iter().try_for_each(check_expression),
        };
        match verdict {
            Ok(()) => Ok(TreeNodeRecursion::Continue),
            Err(refusal) => {
                outcome = Err(refusal);
                Ok(TreeNodeRecursion::Stop)
            }
        }
    });
    outcome.map(|()| scanned)
}

/// DataFusion prefixes plan errors with "Error during planning: ".
pub(crate) fn strip_prefix(message: &str) -> &str {
    message
        .strip_prefix("Error during planning: ")
        .unwrap_or(message)
}
