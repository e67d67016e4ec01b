//! Where values begin and end in JSON that is already known to be valid.
//!
//! A tool result reaches interception as a `Box<RawValue>`: serde_json validated every byte of
//! it when the message was read. Finding the parts interception looks at — the content blocks,
//! `structuredContent`, the members of a nested object — then needs no second validating parse,
//! only brackets and string ends, found 64 bytes at a time. serde_json
//! re-reads every value it skips (each escape of a megabyte text block, each number of a table)
//! through its validating path, which cost as much as the rest of interception together.
//!
//! Everything here takes text that serde_json has accepted (or a span of it) and returns spans
//! of that same text. On text that is not valid JSON the answers are unspecified but never a
//! panic: every access is checked, and a caller meeting `None` passes the result through.

use std::borrow::Cow;

use crate::common::json::{is_whitespace, skip_whitespace, string_content_of};

/// Where four kinds of byte sit in a block of 64 (bit `i` for byte `i`): quotes, backslashes,
/// `{` or `[`, `}` or `]`.
#[derive(Default)]
struct Marks {
    quote: u64,
    backslash: u64,
    open: u64,
    close: u64,
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[allow(unsafe_code)]
fn marks(block: &[u8; 64]) -> Marks {
    // SAFETY: compiled only where SSE2 is enabled for the whole build (it is part of the
    // x86_64 baseline), so the CPU running this has it; the function itself is safe code.
    unsafe { sse2::marks(block) }
}

/// Sixteen bytes compared at once: four times fewer steps than the portable loop below, which
/// compilers do not turn into vector code on their own (measured: 0.2 vs 4.5 ms for 2.4 MB).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod sse2 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_movemask_epi8, _mm_or_si128, _mm_set_epi8, _mm_set1_epi8,
    };

    #[target_feature(enable = "sse2")]
    pub(super) fn marks(block: &[u8; 64]) -> super::Marks {
        let quote = _mm_set1_epi8(b'"' as i8);
        let backslash = _mm_set1_epi8(b'\\' as i8);
        // `[` and `]` are `{` and `}` without the 0x20 bit: one comparison each after setting it.
        let case = _mm_set1_epi8(0x20);
        let open = _mm_set1_epi8(b'{' as i8);
        let close = _mm_set1_epi8(b'}' as i8);
        let mut marks = super::Marks::default();
        for (index, c) in block.chunks_exact(16).enumerate() {
            let shift = 16 * index;
            let bytes = _mm_set_epi8(
                c[15] as i8,
                c[14] as i8,
                c[13] as i8,
                c[12] as i8,
                c[11] as i8,
                c[10] as i8,
                c[9] as i8,
                c[8] as i8,
                c[7] as i8,
                c[6] as i8,
                c[5] as i8,
                c[4] as i8,
                c[3] as i8,
                c[2] as i8,
                c[1] as i8,
                c[0] as i8,
            );
            let folded = _mm_or_si128(bytes, case);
            marks.quote |=
                u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(bytes, quote)) as u16) << shift;
            marks.backslash |=
                u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(bytes, backslash)) as u16) << shift;
            marks.open |=
                u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(folded, open)) as u16) << shift;
            marks.close |=
                u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(folded, close)) as u16) << shift;
        }
        marks
    }
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
fn marks(block: &[u8; 64]) -> Marks {
    portable_marks(block)
}

#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
fn portable_marks(block: &[u8; 64]) -> Marks {
    let mut marks = Marks::default();
    for (index, &byte) in block.iter().enumerate() {
        marks.quote |= u64::from(byte == b'"') << index;
        marks.backslash |= u64::from(byte == b'\\') << index;
        marks.open |= u64::from(byte | 0x20 == b'{') << index;
        marks.close |= u64::from(byte | 0x20 == b'}') << index;
    }
    marks
}

/// The bytes escaped by a backslash (the second byte of every `\\x`), given the block's
/// backslashes; `carry` says whether the previous block ended with an unfinished escape. This is
/// the branch-free method of simdjson (Langdale & Lemire, "Parsing gigabytes of JSON per
/// second"): runs of backslashes of odd length escape the byte after them.
fn escaped(backslash: u64, carry: &mut u64) -> u64 {
    const EVEN_BITS: u64 = 0x5555_5555_5555_5555;
    let backslash = backslash & !*carry;
    let follows_escape = (backslash << 1) | *carry;
    let odd_starts = backslash & !EVEN_BITS & !follows_escape;
    let (even_runs, overflow) = odd_starts.overflowing_add(backslash);
    *carry = u64::from(overflow);
    (EVEN_BITS ^ (even_runs << 1)) & follows_escape
}

/// Bit `i` = the parity of the bits of `x` at or below `i`.
fn prefix_xor(mut x: u64) -> u64 {
    for shift in [1, 2, 4, 8, 16, 32] {
        x ^= x << shift;
    }
    x
}

/// One block of 64 bytes as the scanners see it.
struct Block {
    start: usize,
    /// Quotes that open or close a string (not escaped).
    quotes: u64,
    /// Brackets outside strings.
    open: u64,
    close: u64,
}

/// Blocks of 64 bytes from `start` (which must be outside any string, or just after an
/// opening quote with `inside` set), carrying escapes and string state across blocks.
struct Blocks<'b> {
    bytes: &'b [u8],
    start: usize,
    escape_carry: u64,
    /// All ones when the previous block ended inside a string.
    string_carry: u64,
}

impl<'b> Blocks<'b> {
    fn new(bytes: &'b [u8], start: usize, inside: bool) -> Self {
        Self {
            bytes,
            start,
            escape_carry: 0,
            string_carry: if inside { u64::MAX } else { 0 },
        }
    }

    fn next_block(&mut self) -> Option<Block> {
        let start = self.start;
        let rest = self.bytes.get(start..).filter(|rest| !rest.is_empty())?;
        self.start += 64;
        let mut padded = [b' '; 64];
        let block: &[u8; 64] = match rest.get(..64).and_then(|b| b.try_into().ok()) {
            Some(block) => block,
            None => {
                padded[..rest.len()].copy_from_slice(rest);
                &padded
            }
        };
        let marks = marks(block);
        let quotes = marks.quote & !escaped(marks.backslash, &mut self.escape_carry);
        let inside = prefix_xor(quotes) ^ self.string_carry;
        self.string_carry = ((inside as i64) >> 63) as u64;
        Some(Block {
            start,
            quotes,
            open: marks.open & !inside,
            close: marks.close & !inside,
        })
    }
}

/// The end (one past the closing quote) of the string whose opening quote is at `at`.
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    let mut blocks = Blocks::new(bytes, at + 1, true);
    while let Some(block) = blocks.next_block() {
        if block.quotes != 0 {
            return Some(block.start + block.quotes.trailing_zeros() as usize + 1);
        }
    }
    None
}

/// The end of the object or array that opens at `at`.
fn container_end(bytes: &[u8], at: usize) -> Option<usize> {
    let mut blocks = Blocks::new(bytes, at, false);
    let mut depth: u32 = 0;
    while let Some(block) = blocks.next_block() {
        let (opens, closes) = (block.open.count_ones(), block.close.count_ones());
        if closes < depth || block.close == 0 {
            // Even closing first, this block cannot bring the depth to zero.
            depth = depth + opens - closes;
            continue;
        }
        let mut brackets = block.open | block.close;
        while brackets != 0 {
            let bit = brackets.trailing_zeros();
            brackets &= brackets - 1;
            if block.open >> bit & 1 == 1 {
                depth += 1;
            } else {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(block.start + bit as usize + 1);
                }
            }
        }
    }
    None
}

/// The end of the value that begins at `at` (no whitespace before it).
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => container_end(bytes, at),
        // A number or a literal: up to the next delimiter.
        _ => {
            let mut i = at;
            while bytes
                .get(i)
                .is_some_and(|&b| !is_whitespace(b) && !matches!(b, b',' | b']' | b'}'))
            {
                i += 1;
            }
            (i > at).then_some(i)
        }
    }
}

/// A reader that walks valid JSON without parsing what it skips: enter a container, step
/// through its items, read keys, take values as raw spans.
pub(crate) struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

/// One open container: what closes it, and whether an item has been read yet.
pub(crate) struct Level {
    close: u8,
    first: bool,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Self { text, at: 0 }
    }

    fn skip_whitespace(&mut self) -> Option<u8> {
        self.at = skip_whitespace(self.text.as_bytes(), self.at);
        self.text.as_bytes().get(self.at).copied()
    }

    /// Enter the object (`open` = `{`) or array (`[`) that comes next.
    pub(crate) fn enter(&mut self, open: u8) -> Option<Level> {
        (self.skip_whitespace()? == open).then_some(())?;
        self.at += 1;
        Some(Level {
            close: if open == b'{' { b'}' } else { b']' },
            first: true,
        })
    }

    /// Whether another item follows in `level` (its comma read), or the container ended (its
    /// closing bracket read).
    pub(crate) fn next(&mut self, level: &mut Level) -> Option<bool> {
        let byte = self.skip_whitespace()?;
        if byte == level.close {
            self.at += 1;
            return Some(false);
        }
        if level.first {
            level.first = false;
            return Some(true);
        }
        (byte == b',').then_some(())?;
        self.at += 1;
        Some(true)
    }

    /// An object member's key, decoded, and its colon.
    pub(crate) fn key(&mut self) -> Option<Cow<'a, str>> {
        (self.skip_whitespace()? == b'"').then_some(())?;
        let end = string_end(self.text.as_bytes(), self.at)?;
        let key = string_content_of(self.text.get(self.at..end)?)?;
        self.at = end;
        (self.skip_whitespace()? == b':').then_some(())?;
        self.at += 1;
        Some(key)
    }

    /// The next value as its raw text.
    pub(crate) fn value(&mut self) -> Option<&'a str> {
        self.skip_whitespace()?;
        let end = value_end(self.text.as_bytes(), self.at)?;
        let value = self.text.get(self.at..end)?;
        self.at = end;
        Some(value)
    }

    /// Only whitespace is left.
    pub(crate) fn finish(&mut self) -> Option<()> {
        (self.skip_whitespace().is_none()).then_some(())
    }
}

/// The members of the object `text` (valid JSON), keys decoded, in source order (a repeated key
/// appears twice). `None` when it is not an object.
pub(crate) fn object_members(text: &str) -> Option<Vec<(Cow<'_, str>, &str)>> {
    let mut cursor = Cursor::new(text);
    let mut level = cursor.enter(b'{')?;
    let mut members = Vec::new();
    while cursor.next(&mut level)? {
        let key = cursor.key()?;
        members.push((key, cursor.value()?));
    }
    cursor.finish()?;
    Some(members)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    /// The elements of the array `text` (valid JSON). `None` when it is not an array.
    fn array_elements(text: &str) -> Option<Vec<&str>> {
        let mut cursor = Cursor::new(text);
        let mut level = cursor.enter(b'[')?;
        let mut elements = Vec::new();
        while cursor.next(&mut level)? {
            elements.push(cursor.value()?);
        }
        cursor.finish()?;
        Some(elements)
    }

    /// The members serde_json reads: keys decoded, values as their raw text.
    fn serde_members(text: &str) -> Option<Vec<(String, String)>> {
        let object: crate::ingest::RawObject<'_> = serde_json::from_str(text).ok()?;
        Some(
            object
                .members
                .into_iter()
                .map(|(k, v)| (k.into_owned(), v.get().to_string()))
                .collect(),
        )
    }

    fn skim_members(text: &str) -> Option<Vec<(String, String)>> {
        Some(
            object_members(text)?
                .into_iter()
                .map(|(k, v)| (k.into_owned(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn members_and_elements_of_valid_json() {
        let text = r#" { "a" : [1, {"b": "]}\"\\"}, "x\ty"], "k\"ey": "v\\", "n": -1.5e3,
                        "t": true, "z": null, "o": {}, "e": [], "a": "again" } "#;
        assert_eq!(skim_members(text), serde_members(text));
        let members = object_members(text).expect("object");
        assert_eq!(members[1].0, "k\"ey");
        assert_eq!(members[1].1, r#""v\\""#);
        assert_eq!(members[3].1, "true");
        assert_eq!(
            array_elements(r#"[ 1 ,"a,]",{"x":[2]} ,null]"#),
            Some(vec!["1", r#""a,]""#, r#"{"x":[2]}"#, "null"])
        );
        assert_eq!(array_elements("[]"), Some(vec![]));
        assert_eq!(object_members("{}").map(|m| m.len()), Some(0));
        assert_eq!(object_members("[1]"), None);
        assert_eq!(array_elements(r#"{"a": 1}"#), None);
        assert_eq!(array_elements("7"), None);
    }

    #[test]
    fn strings_end_at_their_closing_quote_whatever_the_word_boundaries() {
        // Backslash runs and quotes at every offset within a word.
        for pad in 0..17 {
            let body = format!("{}\\\\\\\"x\\\\", "p".repeat(pad));
            let text = format!(r#"{{"k": "{body}", "after": 1}}"#);
            let members = object_members(&text).expect("object");
            assert_eq!(members[0].1, format!("\"{body}\""));
            assert_eq!(members[1].1, "1");
        }
    }

    #[test]
    fn garbage_never_panics() {
        for text in [
            "",
            "{",
            "[",
            "{\"a\"",
            "{\"a\":",
            "{\"a\":1,",
            "[1,",
            "\"",
            "{]",
            "[}",
            "}",
        ] {
            let _ = object_members(text);
            let _ = array_elements(text);
        }
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[\"\\\\a\\]\\[{}: ,\\n\\u{e9}\\u{1F600}]{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(("[a-c\"\\\\]{0,3}", inner), 0..6)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn vector_and_portable_marks_agree(block in prop::collection::vec(
            prop::sample::select(b"ab\"\\{}[] ,:".to_vec()), 64)) {
            let block: [u8; 64] = block.try_into().expect("64 bytes");
            let (fast, portable) = (marks(&block), portable_marks(&block));
            prop_assert_eq!(
                (fast.quote, fast.backslash, fast.open, fast.close),
                (portable.quote, portable.backslash, portable.open, portable.close)
            );
        }

        #[test]
        fn long_strings_and_containers_end_where_serde_says(
            parts in prop::collection::vec(prop::sample::select(vec!["a", "\\", "\"", "{", "]", "é"]), 0..300),
            nesting in 0usize..3,
        ) {
            // Strings and containers across several 64-byte blocks, backslash runs at every
            // offset of a block.
            let body: String = parts.concat();
            let mut value = Value::String(body.clone());
            for _ in 0..nesting {
                value = serde_json::json!([{"k": value, "b": body}, 1]);
            }
            let text = format!(r#"{{"v": {value}, "w": 2}}"#);
            prop_assert_eq!(skim_members(&text), serde_members(&text));
        }

        #[test]
        fn agrees_with_serde_json(value in any_json(), pretty in any::<bool>()) {
            let text = if pretty {
                serde_json::to_string_pretty(&value)
            } else {
                serde_json::to_string(&value)
            }
            .expect("serialize");
            prop_assert_eq!(skim_members(&text), serde_members(&text));
            let elements = array_elements(&text);
            let expected = serde_json::from_str::<Vec<&serde_json::value::RawValue>>(&text)
                .ok()
                .map(|e| e.iter().map(|v| v.get()).collect::<Vec<_>>());
            prop_assert_eq!(elements, expected);
        }
    }
}
