//! The house reads straight down (README's Layout): a module of loom refers only to modules of
//! a lower layer, never to one above it or beside it, so the result path can be read from the
//! gateway down to `common/` without turning back. This reads every source file for
//! `crate::<module>` paths and names each reference that climbs.

use std::collections::BTreeSet;
use std::path::Path;

/// Top-level modules by layer, top first. A module may use modules of later layers only.
const LAYERS: &[&[&str]] = &[
    &["cli"],
    &["demo", "http"],
    &["gateway"],
    &["tools"],
    &["report", "snapshot", "export", "llm", "intercept"],
    &["reduce", "envelope"],
    &["hints", "redact"],
    &["store", "downstream"],
    &["ingest", "wire", "config", "footprint"],
    &["parallel", "token"],
    &["common"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_module_imports_one_above_or_beside_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut climbs = BTreeSet::new();
    let mut unplaced = BTreeSet::new();
    for file in &files {
        let relative = file.strip_prefix(&src).expect("under src");
        let first = relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .expect("a name");
        let module = first.trim_end_matches(".rs");
        if matches!(module, "lib" | "main" | "bin") {
            continue;
        }
        let Some(own) = layer_of(module) else {
            unplaced.insert(module.to_string());
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read");
        for (at, _) in text.match_indices("crate::") {
            let used: String = text[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if used.is_empty() || used == module {
                continue;
            }
            match layer_of(&used) {
                Some(layer) if layer > own => {}
                Some(_) => {
                    climbs.insert(format!("{} uses crate::{used}", relative.display()));
                }
                None => {
                    unplaced.insert(used);
                }
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules missing from LAYERS (place them in README's Layout and here): {unplaced:?}"
    );
    assert!(
        climbs.is_empty(),
        "imports that climb or go sideways:\n{}",
        climbs.into_iter().collect::<Vec<_>>().join("\n")
    );
}
