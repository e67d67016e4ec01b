//! A raw JSON lexer: what loom reads of JSON text without parsing it into values — whitespace,
//! the kind of a value from its first byte, string bodies and their unescaping (one pass, in a
//! buffer of the final size, two threads for long bodies), object keys borrowed from the source.
//! Ingest builds rows with it and the result path locates tables and skims text with it, so it
//! lives below both.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, Visitor};
use serde_json::value::RawValue;

/// An object key, borrowed from the source unless it holds escapes. (serde's own `Cow<str>`
/// always copies, which costs one allocation per cell.)
pub(crate) struct Key<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for KeyVisitor<'a> {
            type Value = Key<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                key: &'de str,
            ) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(key)))
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(key.to_string())))
            }
            fn visit_string<E: serde::de::Error>(self, key: String) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(key)))
            }
        }
        deserializer.deserialize_str(KeyVisitor(std::marker::PhantomData))
    }
}

/// JSON's whitespace (not Unicode's, nor ASCII form feed).
pub(crate) fn is_whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\n' | b'\r' | b'\t')
}

/// The first position at or after `at` that is not JSON whitespace.
pub(crate) fn skip_whitespace(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(|&b| is_whitespace(b)) {
        at += 1;
    }
    at
}

/// What a raw JSON value is, from its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

pub(crate) fn kind(raw: &RawValue) -> Kind {
    kind_of(raw.get())
}

/// [`kind`] of a JSON value's text.
pub(crate) fn kind_of(text: &str) -> Kind {
    match text.as_bytes().first() {
        Some(b'n') => Kind::Null,
        Some(b't' | b'f') => Kind::Bool,
        Some(b'"') => Kind::String,
        Some(b'[') => Kind::Array,
        Some(b'{') => Kind::Object,
        _ => Kind::Number,
    }
}

/// The content of a raw JSON string. Borrowed when it has no escapes.
pub(crate) fn string_content(raw: &RawValue) -> Option<Cow<'_, str>> {
    string_content_of(raw.get())
}

/// [`string_content`] of a JSON string's text, quotes included.
pub(crate) fn string_content_of(text: &str) -> Option<Cow<'_, str>> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    if inner.contains('\\') {
        unescape(inner).map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(inner))
    }
}

/// The four hex digits of a `\uXXXX` escape.
fn hex4(digits: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(digits.get(..4)?).ok()?;
    u32::from_str_radix(text, 16).ok()
}

/// Bodies longer than this are decoded in two halves on two threads.
const PARALLEL_UNESCAPE_BYTES: usize = 256 * 1024;

/// The text of a JSON string body (`inner`: between the quotes, escapes as written), decoded in
/// one pass into a buffer of its final size. A JSON text carried inside a tool result's text
/// block is megabytes with an escape every few bytes; serde_json decodes such a string through
/// a growing scratch buffer and then copies it, which touched three times the memory.
/// `None` where serde_json would refuse the string too: an unknown escape, a lone surrogate.
pub(crate) fn unescape(inner: &str) -> Option<String> {
    let bytes = inner.as_bytes();
    // Decoding never lengthens a body (`\"` → `"`, `\u00e9` → 2 bytes, a surrogate pair's 12
    // bytes → 4), so each part decodes in place into its own slice of one buffer. `vec![0; n]`
    // comes from fresh zeroed pages: no pass to clear it.
    let mut out = vec![0u8; bytes.len()];
    let split = (bytes.len() >= PARALLEL_UNESCAPE_BYTES && super::cores() > 1)
        .then(|| split_point(bytes))
        .flatten();
    let written = match split {
        Some(split) => {
            let (head, tail) = bytes.split_at(split);
            let (head_out, tail_out) = out.split_at_mut(split);
            let (head_written, tail_written) = std::thread::scope(|scope| {
                let tail = scope.spawn(|| unescape_into(tail, tail_out));
                let head_written = unescape_into(head, head_out);
                (head_written, tail.join().ok().flatten())
            });
            let (head_written, tail_written) = (head_written?, tail_written?);
            out.copy_within(split..split + tail_written, head_written);
            head_written + tail_written
        }
        None => unescape_into(bytes, &mut out)?,
    };
    out.truncate(written);
    // Escapes only ever insert whole characters between whole characters, so this holds; the
    // check costs one fast pass and keeps this free of `unsafe`.
    String::from_utf8(out).ok()
}

/// A place near the middle of an escaped body where an escape begins: the first backslash of a
/// run that follows a character other than a backslash (in a valid body such a backslash
/// cannot be the second half of `\\`, and hex digits are never backslashes) — and not the low
/// half of a surrogate pair (`\ud83d\ude00` decodes only as a whole), so any backslash right
/// after something that reads like `\uD800`–`\uDBFF` is passed over.
fn split_point(bytes: &[u8]) -> Option<usize> {
    let after_high_surrogate = |i: usize| {
        i >= 6
            && bytes[i - 6] == b'\\'
            && bytes[i - 5] == b'u'
            && hex4(&bytes[i - 4..i]).is_some_and(|unit| (0xD800..=0xDBFF).contains(&unit))
    };
    let middle = bytes.len() / 2;
    (middle.max(1)..bytes.len())
        .find(|&i| bytes[i] == b'\\' && bytes[i - 1] != b'\\' && !after_high_surrogate(i))
}

const LOW_BITS: u64 = u64::from_ne_bytes([0x01; 8]);
const HIGH_BITS: u64 = u64::from_ne_bytes([0x80; 8]);

/// The high bit of every byte of `word` equal to `byte` — exact for the lowest such byte, the
/// only one ever used (the classic has-zero-byte test: a false mark only sits above a true one).
pub(crate) fn byte_marks(word: u64, byte: u8) -> u64 {
    let x = word ^ (LOW_BITS * u64::from(byte));
    x.wrapping_sub(LOW_BITS) & !x & HIGH_BITS
}

/// The eight bytes at `at` as a little-endian word (byte `at` lowest).
pub(crate) fn word_at(bytes: &[u8], at: usize) -> Option<u64> {
    let mut word = [0u8; 8];
    word.copy_from_slice(bytes.get(at..at + 8)?);
    Some(u64::from_le_bytes(word))
}

/// Decode `bytes` into `out` (at least as long as `bytes`); the length written. Plain runs go
/// eight bytes at a time: a word without a backslash is copied whole; otherwise the whole word
/// is stored anyway (what follows the backslash is overwritten next, which beats a copy of
/// variable length) and only the bytes before the backslash count. The found-bit arithmetic is
/// exact for the lowest backslash of a word, the only one used.
fn unescape_into(bytes: &[u8], out: &mut [u8]) -> Option<usize> {
    let mut at = 0;
    let mut written = 0;
    loop {
        // Plain bytes up to the next backslash. `written <= at` always holds (escapes shrink),
        // so `out` has room for a whole word wherever `bytes` has one.
        while let Some(word) = word_at(bytes, at) {
            out.get_mut(written..written + 8)?
                .copy_from_slice(&word.to_le_bytes());
            let found = byte_marks(word, b'\\');
            if found == 0 {
                at += 8;
                written += 8;
            } else {
                let plain = (found.trailing_zeros() / 8) as usize;
                at += plain;
                written += plain;
                break;
            }
        }
        // Fewer than eight bytes left, or a backslash at `at`.
        while let Some(&byte) = bytes.get(at) {
            if byte == b'\\' {
                break;
            }
            *out.get_mut(written)? = byte;
            at += 1;
            written += 1;
        }
        if at >= bytes.len() {
            return Some(written);
        }
        let escaped = *bytes.get(at + 1)?;
        at += 2;
        let simple = match escaped {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let unit = hex4(bytes.get(at..)?)?;
                at += 4;
                let code = match unit {
                    0xD800..=0xDBFF => {
                        // A high surrogate must be followed by an escaped low one.
                        if bytes.get(at..at + 2)? != b"\\u" {
                            return None;
                        }
                        let low = hex4(bytes.get(at + 2..)?)?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return None;
                        }
                        at += 6;
                        0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                    }
                    0xDC00..=0xDFFF => return None,
                    _ => unit,
                };
                let mut buffer = [0u8; 4];
                let encoded = char::from_u32(code)?.encode_utf8(&mut buffer).as_bytes();
                out.get_mut(written..written + encoded.len())?
                    .copy_from_slice(encoded);
                written += encoded.len();
                continue;
            }
            _ => return None,
        };
        *out.get_mut(written)? = simple;
        written += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescaping_agrees_with_serde_json() {
        for text in [
            r#""plain""#,
            r#""a\"b\\c\/d\be\ff\ng\rh\ti""#,
            r#""\u00e9\u4e2d\ud83d\ude00 end""#,
            r#""{\"id\": 1, \"name\": \"x\"}""#,
            r#""\\\\\"""#,
            r#""caf\u00E9 ☕""#,
        ] {
            let raw: Box<RawValue> = serde_json::from_str(text).expect("raw");
            let ours = string_content(&raw).map(|c| c.into_owned());
            let theirs = serde_json::from_str::<String>(text).ok();
            assert_eq!(ours, theirs, "{text}");
        }
        // What serde_json refuses, we refuse: lone surrogates.
        for text in [r#""\ud83d""#, r#""\ude00""#, r#""\ud83d\u0041""#] {
            let raw: Box<RawValue> = serde_json::from_str(text).expect("raw");
            assert!(serde_json::from_str::<String>(text).is_err(), "{text}");
            assert_eq!(string_content(&raw), None, "{text}");
        }
    }

    /// `bytes` decoded on this thread alone.
    fn decoded(bytes: &[u8]) -> Option<Vec<u8>> {
        let mut out = vec![0u8; bytes.len()];
        let written = unescape_into(bytes, &mut out)?;
        out.truncate(written);
        Some(out)
    }

    #[test]
    fn long_bodies_decode_the_same_in_two_halves() {
        // Escapes of every kind around the middle, so the split lands next to each of them.
        let piece = r#"{\"k\": \"a\\\\b\\\"c\u00e9\ud83d\ude00\n\"}, "#;
        let body = piece.repeat(PARALLEL_UNESCAPE_BYTES / piece.len() + 7);
        let serial = decoded(body.as_bytes()).expect("serial");
        let whole = unescape(&body).expect("parallel");
        assert_eq!(whole.as_bytes(), serial.as_slice());
        let expected: String = serde_json::from_str(&format!("\"{body}\"")).expect("serde");
        assert_eq!(whole, expected);
        // Every offset of the piece at the middle, the surrogate pair's halves included.
        for cut in 0..2 * piece.len() {
            let body = format!("{}{}", &"x".repeat(cut), piece.repeat(3));
            let split = split_point(body.as_bytes()).expect("a split");
            let mut head = decoded(&body.as_bytes()[..split]).expect("head");
            head.extend(decoded(&body.as_bytes()[split..]).expect("tail"));
            let expected: String = serde_json::from_str(&format!("\"{body}\"")).expect("serde");
            assert_eq!(String::from_utf8(head).expect("utf8"), expected);
        }
    }

    #[test]
    fn a_surrogate_pair_at_the_middle_is_never_split() {
        let half = PARALLEL_UNESCAPE_BYTES / 2;
        for offset in 0..8 {
            let body = format!(
                "{}\\ud83d\\ude00{}",
                "a".repeat(half - offset),
                "a".repeat(half + offset)
            );
            let expected: String = serde_json::from_str(&format!("\"{body}\"")).expect("serde");
            assert_eq!(unescape(&body), Some(expected), "offset {offset}");
        }
    }

    proptest::proptest! {
        /// Any text, each character written plainly or as `\uXXXX` (surrogate pairs beyond
        /// the BMP), decodes back to itself.
        #[test]
        fn any_escaped_text_decodes_to_itself(text in ".{0,40}", as_unicode in proptest::collection::vec(proptest::bool::ANY, 40)) {
            let mut body = String::new();
            for (index, c) in text.chars().enumerate() {
                if as_unicode.get(index).copied().unwrap_or(false) || c == '"' || c == '\\' || c < ' ' {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        body.push_str(&format!("\\u{unit:04x}"));
                    }
                } else {
                    body.push(c);
                }
            }
            proptest::prop_assert_eq!(unescape(&body), Some(text));
        }
    }

    #[test]
    fn strings_are_unescaped_only_when_needed() {
        let plain: Box<RawValue> = serde_json::from_str(r#""abc""#).expect("raw");
        assert!(matches!(string_content(&plain), Some(Cow::Borrowed("abc"))));
        let escaped: Box<RawValue> = serde_json::from_str(r#""a\"b\u00e9""#).expect("raw");
        assert_eq!(string_content(&escaped).as_deref(), Some("a\"bé"));
    }
}
