//! The house reads straight down (README's Layout): a module of loom refers only to modules of
//! a lower layer, never to one above it or beside it, so the result path can be read from the
//! gateway down to `common/` without turning back. Every source file is parsed as Rust (`syn`):
//! its `use` trees (groups included), the paths in its code, and the paths in its macro bodies
//! (`tokio::select!`, `json!`, `tracing::…!` hold code syn does not parse), each resolved from
//! the file's own module (`crate::`, `super::` at any depth, `self::`). Doc comments and strings
//! are not code and are not read.
//!
//! Two more rules: the data plane (the modules that turn results into tables and text) names
//! no protocol or HTTP crate — it is as usable without MCP as DataFusion is without a server —
//! and it does not read config's parsing (what it needs of config lives in `common`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// Top-level modules by layer, top first. A module may use modules of later layers only.
const LAYERS: &[&[&str]] = &[
    &["cli"],
    &["demo", "http"],
    &["gateway"],
    &["result"],
    &["tools"],
    &["cluster"],
    &["report", "snapshot", "export", "llm", "intercept"],
    &["reduce", "envelope"],
    &["hints", "redact"],
    &["store", "downstream"],
    &["telemetry"],
    &["ingest", "wire", "config", "footprint"],
    &["parallel", "token"],
    &["common"],
];

/// The data plane: results to tables and text, with no protocol in it.
const DATA_PLANE: &[&str] = &[
    "ingest",
    "store",
    "envelope",
    "hints",
    "snapshot",
    "export",
    "intercept",
    "reduce",
];

/// Crates the data plane must not name: the MCP SDK and the HTTP stack.
const PROTOCOL_CRATES: &[&str] = &[
    "rmcp",
    "hyper",
    "hyper_util",
    "http_body_util",
    "reqwest",
    "sse_stream",
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under src/: `a/mod.rs` → [a], `a/b.rs` → [a, b].
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" {
            parts.push(stem.to_string());
        }
    }
    parts
}

/// What one file refers to: the top-level modules its paths reach, and the first segments of
/// paths that are not loom's (crates, or items of its own module).
struct Refs {
    /// The module the code being visited is in (inline `mod x { … }` pushes `x`).
    here: Vec<String>,
    modules: BTreeSet<String>,
    heads: BTreeSet<String>,
}

impl Refs {
    /// Resolve a path written in `self.here`; record what it reaches.
    fn path(&mut self, segments: &[String]) {
        let Some(first) = segments.first() else {
            return;
        };
        let resolved: Option<Vec<String>> = match first.as_str() {
            "crate" => Some(segments[1..].to_vec()),
            "self" => Some(self.here.iter().chain(&segments[1..]).cloned().collect()),
            "super" => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                let kept = self.here.len().saturating_sub(ups);
                Some(
                    self.here[..kept]
                        .iter()
                        .chain(&segments[ups..])
                        .cloned()
                        .collect(),
                )
            }
            _ => None,
        };
        match resolved {
            Some(path) => {
                if let Some(top) = path.first() {
                    self.modules.insert(top.clone());
                }
            }
            None => {
                // A path that starts elsewhere names a crate, or an item in scope here.
                self.heads.insert(first.clone());
            }
        }
    }

    /// Paths inside a macro's tokens: `ident :: ident …` runs, in nested groups too.
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut at = 0;
        while at < trees.len() {
            match &trees[at] {
                TokenTree::Group(group) => {
                    self.tokens(group.stream());
                    at += 1;
                }
                TokenTree::Ident(ident) => {
                    let mut segments = vec![ident.to_string()];
                    let mut next = at + 1;
                    while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) =
                        (trees.get(next), trees.get(next + 1))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        match trees.get(next + 2) {
                            Some(TokenTree::Ident(segment)) => {
                                segments.push(segment.to_string());
                                next += 3;
                            }
                            _ => break,
                        }
                    }
                    if segments.len() > 1 {
                        self.path(&segments);
                    }
                    at = next.max(at + 1);
                }
                TokenTree::Punct(_) | TokenTree::Literal(_) => at += 1,
            }
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                let mut full = prefix.clone();
                full.push(name.ident.to_string());
                self.path(&full);
            }
            syn::UseTree::Rename(rename) => {
                let mut full = prefix.clone();
                full.push(rename.ident.to_string());
                self.path(&full);
            }
            syn::UseTree::Glob(_) => {
                let mut full = prefix.clone();
                full.push("*".into());
                self.path(&full);
            }
            syn::UseTree::Group(group) => {
                for item in &group.items {
                    self.use_tree(prefix, item);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Refs {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        self.here.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.here.pop();
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let mut prefix = Vec::new();
        self.use_tree(&mut prefix, &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1 {
            self.path(&segments);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        syn::visit::visit_macro(self, mac);
        self.tokens(mac.tokens.clone());
    }
}

/// Every file's references, with the file's path under src/ and its module path.
fn references() -> Vec<(PathBuf, Vec<String>, Refs)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut all = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&src).expect("under src").to_path_buf();
        let module = module_of(&relative);
        if matches!(
            module.first().map(String::as_str),
            Some("lib" | "main" | "bin") | None
        ) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read");
        let parsed = syn::parse_file(&text)
            .unwrap_or_else(|error| panic!("{} does not parse: {error}", relative.display()));
        let mut refs = Refs {
            here: module.clone(),
            modules: BTreeSet::new(),
            heads: BTreeSet::new(),
        };
        refs.visit_file(&parsed);
        all.push((relative, module, refs));
    }
    all
}

#[test]
fn no_module_imports_one_above_or_beside_it() {
    let mut climbs = BTreeSet::new();
    let mut unplaced = BTreeSet::new();
    for (relative, module, refs) in references() {
        let top = &module[0];
        let Some(own) = layer_of(top) else {
            unplaced.insert(top.clone());
            continue;
        };
        for used in &refs.modules {
            if used == top || used == "*" {
                continue;
            }
            match layer_of(used) {
                Some(layer) if layer > own => {}
                Some(_) => {
                    climbs.insert(format!("{} uses crate::{used}", relative.display()));
                }
                None => {
                    unplaced.insert(used.clone());
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

#[test]
fn the_data_plane_names_no_protocol_crate_and_not_config() {
    let mut found = BTreeSet::new();
    let mut data_plane_files = 0;
    for (relative, module, refs) in references() {
        if !DATA_PLANE.contains(&module[0].as_str()) {
            continue;
        }
        data_plane_files += 1;
        for head in &refs.heads {
            if PROTOCOL_CRATES.contains(&head.as_str()) {
                found.insert(format!("{} names {head}", relative.display()));
            }
        }
        if refs.modules.contains("config") {
            found.insert(format!("{} uses crate::config", relative.display()));
        }
    }
    assert!(
        data_plane_files > 40,
        "{data_plane_files} data-plane files read"
    );
    assert!(
        found.is_empty(),
        "the data plane reaches the protocol or config:\n{}",
        found.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// The reader sees what a grep missed, so the rules above can fail.
#[test]
fn groups_super_chains_and_macro_bodies_are_read() {
    let text = r#"
        use crate::{store::Store, gateway::{Gateway}};
        mod inner {
            fn f() { super::super::super::tools::x(); }
        }
        fn g() { tokio::select! { _ = crate::http::serve() => {} } }
        fn h() -> rmcp::model::Tool { todo!() }
    "#;
    let parsed = syn::parse_file(text).expect("parses");
    let mut refs = Refs {
        here: vec!["ingest".into(), "cells".into()],
        modules: BTreeSet::new(),
        heads: BTreeSet::new(),
    };
    refs.visit_file(&parsed);
    let modules: Vec<&str> = refs.modules.iter().map(String::as_str).collect();
    assert_eq!(modules, ["gateway", "http", "store", "tools"]);
    assert!(refs.heads.contains("rmcp") && refs.heads.contains("tokio"));
}
