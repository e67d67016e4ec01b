//! Shared by the tests: loading test data and checking markers against the original.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::Read;

use serde_json::Value;

pub fn load(name: &str) -> String {
    let path = if name.starts_with('/') {
        name.to_string()
    } else {
        format!("{}/testdata/json/{name}", env!("CARGO_MANIFEST_DIR"))
    };
    let bytes = std::fs::read(&path).unwrap();
    if name.ends_with(".gz") {
        let mut s = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut s)
            .unwrap();
        s
    } else {
        String::from_utf8(bytes).unwrap()
    }
}

/// Resolves a path as the markers write it (`$.a['b.c'][3]`); returns the rest of the text too.
pub fn resolve<'v>(root: &'v Value, path: &str) -> (Option<&'v Value>, usize) {
    let b: Vec<char> = path.chars().collect();
    assert_eq!(b[0], '$', "{path}");
    let (mut i, mut v) = (1, Some(root));
    loop {
        match b.get(i) {
            Some('.')
                if b.get(i + 1)
                    .is_some_and(|c| c.is_ascii_alphabetic() || *c == '_') =>
            {
                let s = i + 1;
                i = s;
                while b
                    .get(i)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
                {
                    i += 1;
                }
                let k: String = b[s..i].iter().collect();
                v = v.and_then(|v| v.get(&k));
            }
            Some('[') if b.get(i + 1) == Some(&'\'') => {
                let mut k = String::new();
                i += 2;
                loop {
                    match b[i] {
                        '\\' => {
                            k.push(b[i + 1]);
                            i += 2
                        }
                        '\'' => break,
                        c => {
                            k.push(c);
                            i += 1
                        }
                    }
                }
                i += 2;
                v = v.and_then(|v| v.get(&k));
            }
            Some('[') if b.get(i + 1).is_some_and(char::is_ascii_digit) => {
                let s = i + 1;
                i = s;
                while b[i].is_ascii_digit() {
                    i += 1;
                }
                let n: usize = b[s..i].iter().collect::<String>().parse().unwrap();
                i += 1;
                v = v.and_then(|v| v.get(n));
            }
            _ => return (v, b[..i].iter().collect::<String>().len()),
        }
    }
}

pub fn spans(text: &str) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    let pat = "loom_read(\"doc_4\", offset: ";
    let mut from = 0;
    while let Some(i) = text[from..].find(pat) {
        let at = from + i;
        let rest = &text[at + pat.len()..];
        let off: usize = rest[..rest.find(',').unwrap()].parse().unwrap();
        let rest = &rest[rest.find("length: ").unwrap() + 8..];
        let mut len: usize = rest[..rest.find(')').unwrap()].parse().unwrap();
        if let Some(more) = rest.strip_prefix(&format!("{len}) onwards, ")) {
            len = more
                .split(' ')
                .next()
                .unwrap()
                .replace(',', "")
                .parse()
                .unwrap();
        }
        out.push((at, off, len));
        from = at + pat.len();
    }
    out
}

pub fn strings<'v>(v: &'v Value, out: &mut Vec<&'v str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
        Value::Object(m) => m.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// Checks every marker in `summary` against `original`; returns the number of spans checked.
pub fn check_markers(original: &str, summary: &Value, datasets: &HashMap<String, usize>) -> usize {
    let doc: Value = serde_json::from_str(original).unwrap();
    let chars: Vec<char> = original.chars().collect();
    let mut texts = Vec::new();
    strings(summary, &mut texts);
    let mut checked = 0;
    for s in texts {
        for (at, off, len) in spans(s) {
            let literal: String = chars[off..off + len].iter().collect();
            let value: Value =
                serde_json::from_str(&literal).unwrap_or_else(|e| panic!("{e}: {literal:.80}"));
            if let Some(cut) = s.find("…[+") {
                // A cut string: the span is the whole literal; prefix and length agree.
                let Value::String(full) = value else {
                    panic!("not a string: {literal:.80}")
                };
                assert!(full.starts_with(&s[..cut]), "{s:.100}");
                let more: usize = s[cut + "…[+".len()..]
                    .split(' ')
                    .next()
                    .unwrap()
                    .replace(',', "")
                    .parse()
                    .unwrap();
                assert_eq!(full.chars().count(), s[..cut].chars().count() + more);
            } else {
                // A fold or an elision: the span is the container at the path named before it.
                let path = &s[s.find(" at $").unwrap() + 4..at];
                let (found, _) = resolve(&doc, path);
                assert_eq!(found, Some(&value), "span of {path}");
            }
            checked += 1;
        }
        if s.contains(" at $") {
            let path = &s[s.find(" at $").unwrap() + 4..];
            let (found, used) = resolve(&doc, path);
            let found = found.unwrap_or_else(|| panic!("no such path: {path:.100}"));
            let path = &path[..used];
            let total = |v: &Value| {
                v.as_array()
                    .map(Vec::len)
                    .or(v.as_object().map(|m| m.len()))
            };
            let count = s
                .match_indices(" in all")
                .find_map(|(i, _)| s[..i].rsplit('(').next()?.replace(',', "").parse().ok());
            if let Some(n) = count {
                assert_eq!(total(found), Some(n), "{s}");
            }
            if s.contains("for loom_query") {
                assert_eq!(datasets.get(path).copied(), total(found), "rows for {path}");
            }
        }
    }
    checked
}
