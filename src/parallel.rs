//! Work split by column. Columns of a table are independent (typing, Arrow building,
//! statistics), so a large table uses every core; a small one stays on the calling thread,
//! where a thread would cost more than it saves.

/// Below this many cells (rows × columns) work stays on the calling thread.
pub(crate) const PARALLEL_CELLS: usize = 50_000;

pub(crate) use crate::common::cores;

/// `(0..columns).map(work)`, in order, on up to as many threads as the machine has when the
/// table has at least [`PARALLEL_CELLS`] cells. A panic in `work` is re-raised on the caller
/// (interception turns it into a passthrough).
pub(crate) fn map_columns<T: Send>(
    columns: usize,
    rows: usize,
    work: impl Fn(usize) -> T + Sync,
) -> Vec<T> {
    let threads = cores().min(columns);
    if threads <= 1 || rows.saturating_mul(columns) < PARALLEL_CELLS {
        return (0..columns).map(work).collect();
    }
    let work = &work;
    // Column i goes to thread i % threads; results are put back in column order.
    let mut slots: Vec<Option<T>> = std::iter::repeat_with(|| None).take(columns).collect();
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads)
            .map(|first| {
                scope.spawn(move || {
                    (first..columns)
                        .step_by(threads)
                        .map(|index| (index, work(index)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for index in (0..columns).step_by(threads) {
            slots[index] = Some(work(index));
        }
        for helper in helpers {
            match helper.join() {
                Ok(done) => done
                    .into_iter()
                    .for_each(|(index, value)| slots[index] = Some(value)),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    });
    slots.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_column_order_either_way() {
        let small = map_columns(5, 10, |i| i * 10);
        let large = map_columns(7, 100_000, |i| i * 10);
        assert_eq!(small, vec![0, 10, 20, 30, 40]);
        assert_eq!(large, (0..7).map(|i| i * 10).collect::<Vec<_>>());
        assert!(map_columns(0, 100_000, |i| i).is_empty());
    }

    #[test]
    fn a_panic_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| {
            map_columns(4, 100_000, |i| {
                assert!(i != 3, "column 3");
                i
            })
        });
        assert!(caught.is_err());
    }
}
