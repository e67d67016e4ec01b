//! Exposed names: `<server>_<tool>` made safe for every client.
//!
//! Clients accept `[A-Za-z0-9_-]` and at most 64 characters (some reject more), so every exposed
//! name is sanitized and cut to `max_len`, and two items that would end up with the same name are
//! told apart by a short hash of their *original* identity. The hash is FNV-1a, written out here
//! because the names must stay the same across loom versions and platforms (std's hasher makes no
//! such promise), and a stable name is what lets a user's client keep its permissions per tool.

use std::collections::HashSet;

/// `_` + 8 hex digits.
const SUFFIX_LEN: usize = 9;

/// Replace every character outside `[A-Za-z0-9_-]` with `_`.
pub(crate) fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// 32-bit FNV-1a over `server`, a NUL, and `item`, as 8 lowercase hex digits.
pub(crate) fn stable_hash(server: &str, item: &str) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in server.bytes().chain([0u8]).chain(item.bytes()) {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("{hash:08x}")
}

/// Hands out unique exposed names in a deterministic order: call [`NameAllocator::allocate`] in
/// config order of servers, then each server's own listing order.
#[derive(Debug)]
pub(crate) struct NameAllocator {
    max_len: usize,
    taken: HashSet<String>,
}

impl NameAllocator {
    pub(crate) fn new(max_len: usize) -> Self {
        Self {
            // Below this a name could not hold even the hash suffix and one character.
            max_len: max_len.max(SUFFIX_LEN + 2),
            taken: HashSet::new(),
        }
    }

    /// Reserve a name that no item may take (loom's own tools).
    pub(crate) fn reserve(&mut self, name: &str) {
        self.taken.insert(name.to_string());
    }

    /// The exposed name of `item` of `server`.
    pub(crate) fn allocate(&mut self, server: &str, item: &str) -> String {
        let base = format!("{server}_{}", sanitize(item));
        if base.len() <= self.max_len && !self.taken.contains(&base) {
            self.taken.insert(base.clone());
            return base;
        }
        // `base` is ASCII after sanitizing, so byte slicing is on character boundaries.
        let keep = (self.max_len - SUFFIX_LEN).min(base.len());
        let hash = stable_hash(server, item);
        let mut candidate = format!("{}_{hash}", &base[..keep]);
        // Two different items with the same FNV hash and prefix: astronomically rare, but the
        // result must still be unique and deterministic.
        let mut counter = 2u32;
        while self.taken.contains(&candidate) {
            let tail = format!("_{hash}{counter}");
            let keep = self.max_len.saturating_sub(tail.len()).min(base.len());
            candidate = format!("{}{tail}", &base[..keep]);
            counter += 1;
        }
        self.taken.insert(candidate.clone());
        candidate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str, max: usize) -> bool {
        name.len() <= max
            && !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn plain_names_are_prefixed() {
        let mut names = NameAllocator::new(64);
        assert_eq!(
            names.allocate("github", "list_issues"),
            "github_list_issues"
        );
        assert_eq!(names.allocate("fs", "read-file"), "fs_read-file");
    }

    #[test]
    fn unsafe_characters_are_replaced() {
        let mut names = NameAllocator::new(64);
        assert_eq!(names.allocate("x", "a.b c/é"), "x_a_b_c__");
    }

    #[test]
    fn collisions_get_a_stable_hash_suffix() {
        let mut names = NameAllocator::new(64);
        let first = names.allocate("s", "dup.name");
        let second = names.allocate("s", "dup name");
        assert_eq!(first, "s_dup_name");
        assert_ne!(first, second);
        assert!(second.starts_with("s_dup_name_"));
        assert_eq!(
            second,
            format!("s_dup_name_{}", stable_hash("s", "dup name"))
        );
        // Same input order, same names.
        let mut again = NameAllocator::new(64);
        assert_eq!(again.allocate("s", "dup.name"), first);
        assert_eq!(again.allocate("s", "dup name"), second);
    }

    #[test]
    fn long_names_are_cut_with_the_suffix_inside_the_limit() {
        let mut names = NameAllocator::new(64);
        let long = "a".repeat(100);
        let name = names.allocate("server", &long);
        assert_eq!(name.len(), 64);
        assert!(valid(&name, 64));
        assert!(name.ends_with(&stable_hash("server", &long)));
        // Two long names with a common prefix stay distinct.
        let other = names.allocate("server", &format!("{long}b"));
        assert_ne!(name, other);
        assert_eq!(other.len(), 64);
    }

    #[test]
    fn reserved_names_are_never_handed_out() {
        let mut names = NameAllocator::new(64);
        names.reserve("loom_query");
        let name = names.allocate("loom", "query");
        assert_ne!(name, "loom_query");
    }

    #[test]
    fn every_name_is_valid_and_unique_for_many_inputs() {
        let mut names = NameAllocator::new(20);
        let mut seen = HashSet::new();
        for i in 0..500 {
            let item = format!("tool with spaces and a long tail {}", i % 50);
            let name = names.allocate("srv", &format!("{item}{}", "!".repeat(i % 3)));
            assert!(valid(&name, 20), "{name}");
            assert!(seen.insert(name));
        }
    }

    #[test]
    fn the_hash_is_fnv1a() {
        // Known FNV-1a 32 value of the empty input, and the NUL separator matters.
        assert_eq!(stable_hash("", "").len(), 8);
        assert_ne!(stable_hash("ab", "c"), stable_hash("a", "bc"));
        assert_eq!(stable_hash("a", "b"), stable_hash("a", "b"));
    }
}
