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

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PhysicalExpr, PlanProperties,
};
use futures::StreamExt;

use super::bounded::{MAX_BATCH_BYTES, MAX_VALUE_BYTES};

/// Wrap every projection of `plan` in the bound.
pub fn bound_projections(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
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

/// The largest value of `array` in bytes, for the types whose values can grow (text, binary,
/// lists); 0 for fixed-width ones (their size follows from the row count).
fn largest_value(array: &dyn Array) -> u64 {
    fn widest<O: arrow::array::OffsetSizeTrait>(offsets: &[O]) -> u64 {
        offsets
            .windows(2)
            .map(|w| (w[1].as_usize().saturating_sub(w[0].as_usize())) as u64)
            .max()
            .unwrap_or(0)
    }
    match array.data_type() {
        DataType::Utf8 => widest(array.as_string::<i32>().value_offsets()),
        DataType::LargeUtf8 => widest(array.as_string::<i64>().value_offsets()),
        DataType::Binary => widest(array.as_binary::<i32>().value_offsets()),
        DataType::LargeBinary => widest(array.as_binary::<i64>().value_offsets()),
        DataType::Utf8View => array
            .as_string_view()
            .views()
            .iter()
            .map(|view| u64::from(*view as u32))
            .max()
            .unwrap_or(0),
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            let elements = list.values().to_data().get_slice_memory_size().unwrap_or(0) as u64;
            let count = list.values().len().max(1) as u64;
            widest(list.value_offsets()).saturating_mul(elements / count)
        }
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>();
            let elements = list.values().to_data().get_slice_memory_size().unwrap_or(0) as u64;
            let count = list.values().len().max(1) as u64;
            widest(list.value_offsets()).saturating_mul(elements / count)
        }
        _ => 0,
    }
}

fn check(batch: RecordBatch) -> Result<RecordBatch> {
    let mut total: u64 = 0;
    for column in batch.columns() {
        // What this slice of the column holds (a slice of a held dataset shares its buffers).
        total = total.saturating_add(column.to_data().get_slice_memory_size().unwrap_or(0) as u64);
        let largest = largest_value(column.as_ref());
        if largest > MAX_VALUE_BYTES {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "a computed value of {largest} bytes; loom allows at most {MAX_VALUE_BYTES} bytes \
                 per value"
            )));
        }
    }
    if total > MAX_BATCH_BYTES {
        return Err(DataFusionError::ResourcesExhausted(format!(
            "computed values of {total} bytes for {} rows at once; loom allows at most \
             {MAX_BATCH_BYTES} bytes per batch",
            batch.num_rows()
        )));
    }
    Ok(batch)
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
        let stream = self.input.execute(partition, context)?;
        let schema = stream.schema();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            schema,
            stream.map(|batch| batch.and_then(check)),
        )))
    }
}
