//! Hostile inputs that tests and benches both build, so the case a test bounds is the case a
//! bench measures (compiled for tests and for the `fixture` feature the benches turn on).

/// `count` small data tables (`k`/`v`, two rows each) as one run of HTML, for pages that try to
/// make one result into unboundedly many datasets (issue 35: 40,000 of them took 81 s).
pub fn many_tables(count: usize) -> String {
    (0..count)
        .map(|i| {
            format!(
                "<table><tr><th>k</th><th>v</th></tr><tr><td>{i}</td><td>a{i}</td></tr>\
                 <tr><td>{i}</td><td>b{i}</td></tr></table>"
            )
        })
        .collect()
}
