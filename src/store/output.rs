//! A bound on what each projection produces (SPEC §10.3): every value at most
//! [`bounded::MAX_VALUE_BYTES`], every batch at most [`bounded::MAX_BATCH_BYTES`], checked as
//! batches come out.
//!
//! The value-building functions loom knows are bounded before they build ([`bounded`]); any
//! other function whose output can outgrow its input (`overlay`, `encode`, `array_to_string`, a
//! cast of a list to text, …) is caught here, one step past the limit: a CTE chain that doubles
//! a value at every level stops at the first level over it instead of reaching gigabytes.

use std::fmt;
use std::sync::Arc;

use arrow::array::{Array, RecordBatch};
use arrow::datatypes::DataType;
use arrow::datatypes::FieldRef;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{
    ColumnarValue, Expr, LogicalPlan, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PhysicalExpr, PlanProperties,
};
use datafusion::prelude::SessionContext;
use futures::StreamExt;

use super::bounded::{MAX_BATCH_BYTES, MAX_VALUE_BYTES};

/// Wrap every projection of `plan` in the bound.
pub(crate) fn bound_projections(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        if node.name() == "ProjectionExec" {
            Ok(Transformed::yes(
                Arc::new(OutputBound { input: node }) as Arc<dyn ExecutionPlan>
            ))
        } else {
            Ok(Transformed::no(node))
        }
    })
    .map(|t| t.data)
}

#[derive(Debug)]
struct OutputBound {
    input: Arc<dyn ExecutionPlan>,
}

impl DisplayAs for OutputBound {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "LoomOutputBound")
    }
}

/// Fail when a value of `array` is over [`MAX_VALUE_BYTES`]; returns the bytes the array holds.
fn check_values(array: &dyn Array) -> Result<u64> {
    let largest = super::measure::largest_value(array);
    if largest > MAX_VALUE_BYTES {
        return Err(DataFusionError::ResourcesExhausted(format!(
            "a computed value of {largest} bytes; loom allows at most {MAX_VALUE_BYTES} bytes \
             per value"
        )));
    }
    // What this slice of the array holds (a slice of a held dataset shares its buffers).
    Ok(array.to_data().get_slice_memory_size().unwrap_or(0) as u64)
}

fn check_total(total: u64, rows: usize) -> Result<()> {
    if total > MAX_BATCH_BYTES {
        return Err(DataFusionError::ResourcesExhausted(format!(
            "computed values of {total} bytes for {rows} rows at once; loom allows at most \
             {MAX_BATCH_BYTES} bytes per batch"
        )));
    }
    Ok(())
}

fn check(batch: RecordBatch) -> Result<RecordBatch> {
    let mut total: u64 = 0;
    for column in batch.columns() {
        total = total.saturating_add(check_values(column.as_ref())?);
    }
    check_total(total, batch.num_rows())?;
    Ok(batch)
}

/// The name of the check put around every computed step of an expression.
pub(crate) const STEP_CHECK: &str = "loom_checked";

/// `loom_checked(x)` is `x`, once its values are within the bound. Put around every function
/// call and cast of every expression before the optimizer sees the plan ([`BoundEveryStep`]):
/// a chain of functions that each return a few times their input (`string_to_array` then a
/// cast to text, `array_to_string`, `translate`, …) is merged by the optimizer into one nested
/// expression, or folded at planning time when its input is constant, and neither the
/// projection's bound nor a check after folding would see the steps in between.
#[derive(Debug, PartialEq, Eq, Hash)]
struct StepCheck {
    signature: Signature,
}

impl ScalarUDFImpl for StepCheck {
    fn name(&self) -> &str {
        STEP_CHECK
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        arg_types
            .first()
            .cloned()
            .ok_or_else(|| DataFusionError::Plan(format!("{STEP_CHECK} takes one argument")))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        // The argument's field as it is: nullability and metadata unchanged.
        args.arg_fields
            .first()
            .cloned()
            .ok_or_else(|| DataFusionError::Plan(format!("{STEP_CHECK} takes one argument")))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        super::deadline::check(&args.config_options)?;
        let batch_rows = usize::from(args.config_options.execution.batch_size);
        let Some(value) = args.args.into_iter().next() else {
            return Err(DataFusionError::Internal(format!(
                "{STEP_CHECK} takes one argument"
            )));
        };
        match &value {
            ColumnarValue::Array(array) => {
                let bytes = check_values(array.as_ref())?;
                check_total(bytes, array.len())?;
            }
            ColumnarValue::Scalar(scalar) => {
                // A value computed from constants alone is copied into every row of every batch
                // it meets (folded at planning, it is a literal by then): counted once per row.
                // Its value's own bytes count, as for the value builders' constants.
                let one = scalar.to_array_of_size(1)?;
                check_values(one.as_ref())?;
                let bytes = super::measure::largest_value(one.as_ref());
                check_total(bytes.saturating_mul(batch_rows as u64), batch_rows)?;
            }
        }
        Ok(value)
    }
}

/// Puts [`STEP_CHECK`] around every scalar function call and cast in every expression of a
/// plan (subqueries included), keeping the names the expressions had.
#[derive(Debug)]
struct BoundEveryStep {
    check: Arc<ScalarUDF>,
}

impl BoundEveryStep {
    fn wrap(&self, expr: Expr) -> Result<Transformed<Expr>> {
        expr.transform_up(|e| match e {
            // Already checked (the rule may meet its own work): one check is enough.
            Expr::ScalarFunction(ScalarFunction { func, mut args })
                if func.name() == STEP_CHECK =>
            {
                match args.pop() {
                    Some(inner @ Expr::ScalarFunction(ScalarFunction { .. }))
                        if args.is_empty() && is_check(&inner) =>
                    {
                        Ok(Transformed::yes(inner))
                    }
                    Some(inner) => {
                        args.push(inner);
                        Ok(Transformed::no(Expr::ScalarFunction(ScalarFunction {
                            func,
                            args,
                        })))
                    }
                    None => Ok(Transformed::no(Expr::ScalarFunction(ScalarFunction {
                        func,
                        args,
                    }))),
                }
            }
            e @ (Expr::ScalarFunction(_) | Expr::Cast(_) | Expr::TryCast(_)) => {
                Ok(Transformed::yes(self.check.call(vec![e])))
            }
            other => Ok(Transformed::no(other)),
        })
    }
}

fn is_check(expr: &Expr) -> bool {
    matches!(expr, Expr::ScalarFunction(ScalarFunction { func, .. }) if func.name() == STEP_CHECK)
}

impl AnalyzerRule for BoundEveryStep {
    fn name(&self) -> &str {
        "loom_bound_every_step"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| {
            let names = NamePreserver::new(&node);
            node.map_expressions(|expr| {
                let saved = names.save(&expr);
                let wrapped = self.wrap(expr)?;
                Ok(wrapped.update_data(|e| saved.restore(e)))
            })
        })
        .map(|t| t.data)
    }
}

/// Register [`STEP_CHECK`] with `ctx` and check every step of every expression it plans.
pub(crate) fn install(ctx: &SessionContext) {
    let check = Arc::new(ScalarUDF::new_from_impl(StepCheck {
        signature: Signature::any(1, Volatility::Immutable),
    }));
    ctx.register_udf(check.as_ref().clone());
    ctx.add_analyzer_rule(Arc::new(BoundEveryStep { check }));
}

#[allow(deprecated)] // `with_new_children` is still required by the trait in DataFusion 55.
impl ExecutionPlan for OutputBound {
    fn name(&self) -> &str {
        "LoomOutputBound"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        match (children.pop(), children.is_empty()) {
            (Some(input), true) => Ok(Arc::new(OutputBound { input })),
            _ => Err(DataFusionError::Internal(
                "LoomOutputBound takes exactly one input".into(),
            )),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let options = Arc::clone(context.session_config().options());
        let stream = self.input.execute(partition, context)?;
        let schema = stream.schema();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            schema,
            stream.map(move |batch| {
                super::deadline::check(&options)?;
                batch.and_then(check)
            }),
        )))
    }
}
