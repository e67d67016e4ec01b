//! Binary payloads lifted out of text tool results: data URIs and long base64 runs are replaced
//! by a short placeholder and handed to the caller, who keeps the decoded bytes as a blob.
//!
//! One forward pass over the bytes; every byte is looked at a bounded number of times (a segment
//! is parsed at most twice, a lifted run is copied and decoded once), so the cost is linear.

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use super::interrupt::Interrupt;

/// Default shortest bare run, in base64 characters (768 decoded bytes).
///
/// Below it live the things a model may need to read or copy verbatim: keys, signatures,
/// tokens, short secrets, hashes. Above it is payload (images, archives, certificates, file
/// contents) where the ~90-character placeholder saves over 90%, and where the statistics below
/// have enough characters to tell base64 of data from text-like runs reliably.
pub const DEFAULT_MIN_RUN: usize = 1024;

/// A bare `min_run` below this is raised to it: shorter runs are words and ids, not payload.
const MIN_RUN_FLOOR: usize = 16;

/// Data URIs declare themselves, so they need no statistics, only a payload long enough that the
/// placeholder is shorter than what it replaces (a 1×1 GIF stays as it is).
const DATA_URI_MIN: usize = 128;

/// Shortest line width accepted as a wrapping width: MIME uses 76, PEM 64, GitHub's API 60.
/// Short equal-length lines are far more often lists of ids than a wrapped payload.
const MIN_WRAP: usize = 40;

/// OpenSSH private keys wrap at 70, the one common width that is not a multiple of 4. Requiring
/// a multiple of 4 otherwise keeps lists of unpadded hashes (SHA-256: 43, SHA-512: 86 chars, one
/// per line) from being joined into one "wrapped" run.
const OPENSSH_WRAP: usize = 70;

/// A part of a dotted token (JWT/JWS `head.payload.signature`) is a credential the model must be
/// able to pass on verbatim; only a part this many times `min_run` long is treated as payload.
const DOTTED_FACTOR: usize = 8;

/// `data:` + media type + parameters; anything longer is not a header we should trust.
const MAX_DATA_URI_HEADER: usize = 256;

/// A decoded blob found in the text, handed to `keep`.
pub struct FoundBlob {
    pub mime: String,
    pub bytes: Vec<u8>,
    pub data_uri: bool,
}

const ALNUM: u8 = 1;
const STD_ONLY: u8 = 2; // `+` `/`
const URL_ONLY: u8 = 4; // `-` `_`

static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        t[i] = if c.is_ascii_alphanumeric() {
            ALNUM
        } else if c == b'+' || c == b'/' {
            STD_ONLY
        } else if c == b'-' || c == b'_' {
            URL_ONLY
        } else {
            0
        };
        i += 1;
    }
    t
};

const fn engine(alpha: &alphabet::Alphabet, padding: DecodePaddingMode) -> GeneralPurpose {
    GeneralPurpose::new(
        alpha,
        GeneralPurposeConfig::new().with_decode_padding_mode(padding),
    )
}

// Padding, when present, must be exactly canonical; when absent the length must still be one a
// real encoder produces. Non-zero trailing bits are rejected (the crate's default): no encoder
// emits them, and they reject a good share of text that merely uses the alphabet.
static STD_PADDED: GeneralPurpose =
    engine(&alphabet::STANDARD, DecodePaddingMode::RequireCanonical);
static STD_BARE: GeneralPurpose = engine(&alphabet::STANDARD, DecodePaddingMode::RequireNone);
static URL_PADDED: GeneralPurpose =
    engine(&alphabet::URL_SAFE, DecodePaddingMode::RequireCanonical);
static URL_BARE: GeneralPurpose = engine(&alphabet::URL_SAFE, DecodePaddingMode::RequireNone);

/// Width in bytes of the base64 character at `i`: 1, or 2 for JSON's escaped slash `\/` (PHP
/// escapes every `/`, and JPEG base64 starts with `/9j/`); 0 when there is none.
fn b64_at(b: &[u8], i: usize) -> usize {
    match b.get(i) {
        Some(&c) if CLASS[c as usize] != 0 => 1,
        Some(b'\\') if b.get(i + 1) == Some(&b'/') => 2,
        _ => 0,
    }
}

/// A maximal run of base64 characters on one line, with up to two `=` of padding.
#[derive(Clone, Copy)]
struct Seg {
    end: usize,
    chars: usize,
    pad: usize,
}

fn segment(b: &[u8], start: usize) -> Seg {
    let mut i = start;
    let mut chars = 0;
    loop {
        let w = b64_at(b, i);
        if w == 0 {
            break;
        }
        i += w;
        chars += 1;
    }
    let mut pad = 0;
    while pad < 2 && b.get(i) == Some(&b'=') {
        i += 1;
        pad += 1;
    }
    Seg { end: i, chars, pad }
}

/// If a line break (raw, or JSON-escaped inside a string) starts at `i`, where the next line's
/// content starts, past any indentation (YAML block scalars, indented PEM).
fn after_line_break(b: &[u8], i: usize) -> Option<usize> {
    let rest = b.get(i..)?;
    let skip = if rest.starts_with(b"\n") {
        1
    } else if rest.starts_with(b"\r\n") || rest.starts_with(b"\\n") {
        2
    } else if rest.starts_with(b"\\r\\n") {
        4
    } else {
        return None;
    };
    let mut k = i + skip;
    while matches!(b.get(k), Some(b' ' | b'\t')) {
        k += 1;
    }
    Some(k)
}

/// Segments joined across line breaks the way MIME and PEM wrap: every line but the last exactly
/// `width` long, the last no longer. `prev_*` describe the group without its last line, to retry
/// when that line turns out to be a following word or a `-----END` armor line.
struct Group {
    start: usize,
    end: usize,
    chars: usize,
    lines: usize,
    prev_end: usize,
    prev_chars: usize,
}

fn group(b: &[u8], start: usize) -> Group {
    let first = segment(b, start);
    let mut g = Group {
        start,
        end: first.end,
        chars: first.chars,
        lines: 1,
        prev_end: start,
        prev_chars: 0,
    };
    let width = first.chars + first.pad;
    if first.pad > 0 || width < MIN_WRAP || !(width.is_multiple_of(4) || width == OPENSSH_WRAP) {
        return g;
    }
    while let Some(next) = after_line_break(b, g.end) {
        if b64_at(b, next) == 0 {
            break;
        }
        let s = segment(b, next);
        let w = s.chars + s.pad;
        if w > width {
            break;
        }
        g.prev_end = g.end;
        g.prev_chars = g.chars;
        g.end = s.end;
        g.chars += s.chars;
        g.lines += 1;
        if w < width || s.pad > 0 {
            break;
        }
    }
    g
}

/// The base64 characters of `b[start..end]` without line breaks, indentation and escapes.
fn clean(b: &[u8], start: usize, end: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(end.saturating_sub(start));
    let mut i = start;
    while i < end {
        let Some(&c) = b.get(i) else { break };
        if c == b'\\' {
            if b.get(i + 1) == Some(&b'/') {
                out.push(b'/');
            }
            // `\n` and `\r` escapes between lines; `\r\n` is two of them.
            i += 2;
            continue;
        }
        if CLASS[c as usize] != 0 || c == b'=' {
            out.push(c);
        }
        i += 1;
    }
    out
}

fn decode(chars: &[u8]) -> Option<Vec<u8>> {
    let mut std_only = false;
    let mut url_only = false;
    for &c in chars {
        let k = CLASS[c as usize];
        std_only |= k == STD_ONLY;
        url_only |= k == URL_ONLY;
    }
    // One text using both alphabets is two things glued together (`sha384-…/…`), not base64.
    if std_only && url_only {
        return None;
    }
    let padded = chars.last() == Some(&b'=');
    let engine = match (url_only, padded) {
        (false, true) => &STD_PADDED,
        (false, false) => &STD_BARE,
        (true, true) => &URL_PADDED,
        (true, false) => &URL_BARE,
    };
    engine.decode(chars).ok()
}

fn all_hex(chars: &[u8]) -> bool {
    chars.iter().all(|c| c.is_ascii_hexdigit() || *c == b'=')
}

/// Whether the character mix is that of base64 of data rather than of text that happens to use
/// the alphabet. Measured on base64 of random bytes, compressed images, ELF code, English, JSON,
/// Cyrillic, CJK and UTF-16 text versus camelCase identifiers (with and without digits), paths,
/// base32 and hex: upper and lower each ≥ 8% (base32 and hex fail), some digits (identifiers
/// and paths have none), class changes between neighbours ≥ 30% (random base64 ≈ 64%, words
/// ≈ 20–45%), an upper case letter often followed by another (≥ 10%; camelCase ≈ 0–3%) and a
/// lower case one not too often (≤ 65%; words ≈ 75%). Binary with long zero runs (`AAAA…`)
/// fails this; it is lifted only when its magic bytes name it.
fn looks_like_data(chars: &[u8]) -> bool {
    let body = match chars.iter().position(|&c| c == b'=') {
        Some(p) => chars.get(..p).unwrap_or(chars),
        None => chars,
    };
    let n = body.len();
    if n < 2 {
        return false;
    }
    let (mut upper, mut lower, mut digit) = (0usize, 0usize, 0usize);
    let (mut changes, mut uu, mut ll) = (0usize, 0usize, 0usize);
    let mut prev = 255u8;
    for &c in body {
        let k = if c.is_ascii_uppercase() {
            upper += 1;
            0
        } else if c.is_ascii_lowercase() {
            lower += 1;
            1
        } else if c.is_ascii_digit() {
            digit += 1;
            2
        } else {
            3
        };
        if prev != 255 {
            changes += usize::from(k != prev);
            uu += usize::from(k == 0 && prev == 0);
            ll += usize::from(k == 1 && prev == 1);
        }
        prev = k;
    }
    upper * 100 >= n * 8
        && lower * 100 >= n * 8
        && digit * 100 >= n
        && changes * 100 >= (n - 1) * 30
        && uu * 10 >= upper
        && ll * 100 <= lower * 65
}

fn sniff_magic(bytes: &[u8]) -> Option<&'static str> {
    let starts = |m: &[u8]| bytes.starts_with(m);
    if starts(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if starts(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if starts(b"GIF87a") || starts(b"GIF89a") {
        Some("image/gif")
    } else if starts(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        Some("image/webp")
    } else if starts(b"%PDF-") {
        Some("application/pdf")
    } else if starts(b"PK\x03\x04") || starts(b"PK\x05\x06") || starts(b"PK\x07\x08") {
        Some("application/zip")
    } else if starts(b"\x1f\x8b") {
        Some("application/gzip")
    } else if starts(b"\0asm") {
        Some("application/wasm")
    } else {
        None
    }
}

fn is_text(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok()
        && !bytes
            .iter()
            .any(|&c| (c < 0x20 && !matches!(c, b'\t' | b'\n' | b'\r' | 0x0c)) || c == 0x7f)
}

fn sniff(bytes: &[u8]) -> &'static str {
    match sniff_magic(bytes) {
        Some(m) => m,
        None if is_text(bytes) => "text/plain",
        None => "application/octet-stream",
    }
}

/// The placeholder for a run that stands in running text. It contains no quote, backslash or
/// angle bracket, so it is safe inside a JSON string, an XML text node or a Python bytes repr,
/// which is where bare base64 usually sits.
fn placeholder(mime: &str, size: usize, blob_ref: &str) -> String {
    format!(
        "[loom: {mime}, {} bytes of base64 lifted out → loom_read({blob_ref})]",
        crate::common::text::thousands(size)
    )
}

/// The placeholder for a data URI that is an attribute value, a Markdown link target, a CSS
/// `url(…)` or a JSON string: a URI-shaped token with no space, quote, comma or parenthesis, so
/// the surrounding `src="…"`, `![alt](…)` or `srcset` still parses, and still naming the blob.
fn uri_placeholder(mime: &str, size: usize, blob_ref: &str) -> String {
    format!("loom:{blob_ref};type={mime};bytes={size}")
}

fn is_data_uri_start(b: &[u8], i: usize) -> bool {
    let Some(head) = b.get(i..i + 5) else {
        return false;
    };
    // `metadata:` is not a data URI.
    let boundary = i == 0 || b.get(i - 1).is_some_and(|c| !c.is_ascii_alphanumeric());
    boundary && head.eq_ignore_ascii_case(b"data:")
}

fn is_token(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$&^_.+-%".contains(&c)
}

/// `data:<mime>[;param]…;base64,` at `i`: the declared media type and where the payload starts.
fn data_uri_header(b: &[u8], i: usize) -> Option<(String, usize)> {
    let limit = b.len().min(i + MAX_DATA_URI_HEADER);
    let mut j = i + 5;
    let mime_start = j;
    while j < limit && b.get(j).is_some_and(|&c| is_token(c) || c == b'/') {
        j += 1;
    }
    let mime = b.get(mime_start..j)?;
    let mime = if mime.is_empty() {
        // RFC 2397: an omitted media type means text/plain.
        "text/plain".to_string()
    } else {
        let mut parts = mime.split(|&c| c == b'/');
        let (Some(ty), Some(sub), None) = (parts.next(), parts.next(), parts.next()) else {
            return None;
        };
        if ty.is_empty() || sub.is_empty() {
            return None;
        }
        String::from_utf8_lossy(mime).to_ascii_lowercase()
    };
    while j < limit && b.get(j) == Some(&b';') {
        j += 1;
        let p = j;
        while j < limit && b.get(j).is_some_and(|&c| is_token(c) || c == b'=') {
            j += 1;
        }
        if b.get(p..j)
            .is_some_and(|s| s.eq_ignore_ascii_case(b"base64"))
            && b.get(j) == Some(&b',')
        {
            return Some((mime, j + 1));
        }
    }
    None
}

/// `text[from..start]` then `replacement`, leaving `from` at `end`. Positions are always at ASCII
/// bytes; the checked slice only keeps a mistake from becoming a panic.
fn splice(out: &mut String, text: &str, from: &mut usize, start: usize, end: usize, rep: &str) {
    if let Some(kept) = text.get(*from..start) {
        out.push_str(kept);
        out.push_str(rep);
        *from = end;
    }
}

/// Replace each data URI (`data:<mime>[;param…];base64,<payload>`) and each long bare base64 run
/// (≥ `min_run` characters, optionally wrapped in lines as MIME/PEM do) in `text` by a short
/// placeholder. `keep(blob)` stores the decoded blob and returns its ref ("blob_3"), or None to
/// leave that run in place. Returns None when nothing was lifted.
///
/// Never lifted: hex (any length), runs inside a URL, parts of dotted tokens below
/// `8 × min_run`, runs whose character mix is text-like (see `looks_like_data`), and anything
/// that does not decode under canonical padding. PEM bodies are lifted; their armor lines stay.
pub fn lift_binary(
    text: &str,
    min_run: usize,
    keep: &mut dyn FnMut(FoundBlob) -> Option<String>,
) -> Option<String> {
    lift_binary_with(text, min_run, &Interrupt::none(), keep)
}

/// [`lift_binary`] that stops looking when `interrupt` fires: what was lifted stays lifted, the
/// rest of the text is kept as it is (every step is linear, so this only matters on a machine
/// already past the deadline).
pub fn lift_binary_with(
    text: &str,
    min_run: usize,
    interrupt: &Interrupt,
    keep: &mut dyn FnMut(FoundBlob) -> Option<String>,
) -> Option<String> {
    let mut pulse = interrupt.pulse();
    let b = text.as_bytes();
    let min_run = min_run.max(MIN_RUN_FLOOR);
    let mut out = String::new();
    let mut copied = 0usize;
    // Inside a URL (since `://`, up to the next delimiter) a run is part of an address the
    // model may have to use verbatim, so it stays; tracked forward to stay linear.
    let mut in_url = false;
    let mut i = 0usize;
    while let Some(&c) = b.get(i) {
        if pulse.beat() {
            break;
        }
        if (c | 0x20) == b'd'
            && is_data_uri_start(b, i)
            && let Some((mime, payload)) = data_uri_header(b, i)
            && b64_at(b, payload) > 0
        {
            let g = group(b, payload);
            let embedded = i > 0 && b.get(i - 1).is_some_and(|c| !c.is_ascii_whitespace());
            let tries = [(g.end, g.chars), (g.prev_end, g.prev_chars)];
            for &(end, chars) in tries.iter().take(g.lines.min(2)) {
                if chars < DATA_URI_MIN || !uri_ends_at(b, end) {
                    continue;
                }
                let Some(bytes) = decode(&clean(b, payload, end)) else {
                    continue;
                };
                let size = bytes.len();
                let blob = FoundBlob {
                    mime: mime.clone(),
                    bytes,
                    data_uri: true,
                };
                if let Some(r) = keep(blob) {
                    let rep = if embedded {
                        uri_placeholder(&mime, size, &r)
                    } else {
                        placeholder(&mime, size, &r)
                    };
                    splice(&mut out, text, &mut copied, i, end, &rep);
                }
                break;
            }
            i = g.end;
            if g.lines > 1 {
                in_url = false;
            }
            continue;
        }
        if b64_at(b, i) > 0 {
            let g = group(b, i);
            if !in_url {
                lift_bare(b, text, &g, min_run, keep, &mut out, &mut copied);
            }
            i = g.end;
            if g.lines > 1 {
                in_url = false;
            }
            continue;
        }
        match c {
            // An escape pair is one unit: the `n` of `\n` must not start a run, and the second
            // backslash of `\\` must not start a `\/`.
            b'\\' => i += 2,
            b':' if b.get(i + 1..i + 3) == Some(b"//") => {
                in_url = true;
                i += 3;
            }
            b' ' | b'\t' | b'\n' | b'\r' | b'"' | b'\'' | b'<' | b'>' | b'(' | b')' | b'['
            | b',' | b']' | b'{' | b'}' | b'`' | b'|' | b'^' => {
                in_url = false;
                i += 1;
            }
            _ => i += 1,
        }
    }
    // `copied` moves only when a run was spliced out.
    if copied == 0 {
        return None;
    }
    if let Some(rest) = text.get(copied..) {
        out.push_str(rest);
    }
    Some(out)
}

fn lift_bare(
    b: &[u8],
    text: &str,
    g: &Group,
    min_run: usize,
    keep: &mut dyn FnMut(FoundBlob) -> Option<String>,
    out: &mut String,
    copied: &mut usize,
) {
    let tries = [(g.end, g.chars), (g.prev_end, g.prev_chars)];
    for &(end, chars) in tries.iter().take(g.lines.min(2)) {
        if chars < min_run || glued(b, g.start, end) {
            continue;
        }
        if is_dotted_part(b, g.start, end) && chars < min_run.saturating_mul(DOTTED_FACTOR) {
            continue;
        }
        let cleaned = clean(b, g.start, end);
        if all_hex(&cleaned) {
            continue;
        }
        let Some(bytes) = decode(&cleaned) else {
            continue;
        };
        let magic = sniff_magic(&bytes);
        if magic.is_none() && !looks_like_data(&cleaned) {
            continue;
        }
        let mime = magic.unwrap_or_else(|| sniff(&bytes));
        let size = bytes.len();
        let blob = FoundBlob {
            mime: mime.to_string(),
            bytes,
            data_uri: false,
        };
        if let Some(r) = keep(blob) {
            splice(
                out,
                text,
                copied,
                g.start,
                end,
                &placeholder(mime, size, &r),
            );
        }
        return;
    }
}

/// A payload followed by a character that continues a URI (`*`, a third `=`, base64 after the
/// padding, a `%3D` padding…) was not all base64: lifting its valid prefix would leave a broken
/// tail behind.
fn uri_ends_at(b: &[u8], end: usize) -> bool {
    b64_at(b, end) == 0
        && !matches!(
            b.get(end),
            Some(b'%' | b'*' | b'~' | b'$' | b'@' | b'?' | b'#' | b'=')
        )
}

/// Next to a `%XX` escape the run's edge characters belong to the escape, not to base64; a run
/// going on after its padding is two things glued together.
fn glued(b: &[u8], start: usize, end: usize) -> bool {
    (start > 0 && b.get(start - 1) == Some(&b'%'))
        || matches!(b.get(end), Some(b'%' | b'='))
        || b64_at(b, end) > 0
}

/// `aaa.bbb.ccc`: a run with a `.` and another base64url character on either side.
fn is_dotted_part(b: &[u8], start: usize, end: usize) -> bool {
    let urlish = |i: usize| {
        b.get(i)
            .is_some_and(|&c| CLASS[c as usize] & (ALNUM | URL_ONLY) != 0)
    };
    let before = start >= 2 && b.get(start - 1) == Some(&b'.') && urlish(start - 2);
    let after = b.get(end) == Some(&b'.') && urlish(end + 1);
    before || after
}

#[cfg(test)]
mod tests;
