//! Python literal rows: what `print(rows)` shows for a list of dicts —
//! `[{'faa': '04G', 'lat': 41.13, 'tzone': None}, …]` — read the way `ast.literal_eval` reads
//! it, and nothing evaluated.
//!
//! The parser is hand-written recursive descent over the literal grammar. No crate reads Python
//! literals faithfully (the YAML/JSON5 look-alikes get quoting, escapes, `None` or tuples
//! wrong), and the grammar is small: strings (`'…'`, `"…"`, triple-quoted, `r`/`u` prefixes,
//! every escape, adjacent literals concatenated), numbers (ints of any size with `_`, hex, octal,
//! binary; floats), one unary sign, `None`/`True`/`False`, lists, tuples, dicts, sets and
//! `set()`, `#` comments. What `literal_eval` rejects (names, calls such as `datetime(…)`,
//! `nan`, `inf`, f-strings, `-(-1)`) is rejected here, and so is what it accepts but JSON cannot
//! hold faithfully (bytes, complex numbers, `...`, floats beyond f64, non-string dict keys,
//! `\N{…}` escapes, lone surrogates, a dict literal repeating a key — Python keeps only the last
//! value, which is never what a repr shows): the rung declines.
//!
//! The literal becomes JSON (None → null, True/False → booleans, tuples and sets → arrays, ints
//! as their decimal digits whatever their size, floats by value), so the types come from the
//! literal; the JSON is then searched for tables like `structuredContent` (a list of dicts at
//! the root or under a dict's keys). A list of tuples has no column names: not a table.
//!
//! A top-level list the text stops inside of was cut: the rows before the cut are kept and the
//! cut one is dropped and reported.

use std::ops::Range;

use serde_json::value::RawValue;

use super::frame::{self, push_json_string};
use super::{Found, TextTable, Torn};
use crate::intercept::locate::{self, Rung};

/// Deeper nesting than this is refused (Python's own parser stops near 200; the JSON reader
/// after this at 128).
pub(crate) const MAX_DEPTH: usize = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The text ended inside the literal.
    Eof,
    /// Not a literal `literal_eval` accepts, or not one JSON can hold exactly.
    Invalid,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Str,
    Other,
}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    depth: usize,
    scratch: String,
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

impl<'a> Parser<'a> {
    fn new(s: &'a str, at: usize) -> Self {
        Self {
            s,
            b: s.as_bytes(),
            i: at,
            depth: 0,
            scratch: String::new(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    /// Whitespace, line breaks (inside brackets they are free) and `#` comments.
    fn ws(&mut self) {
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' | b'\n' | b'\r' | b'\x0c' => self.i += 1,
                b'#' => {
                    while self.peek().is_some_and(|c| c != b'\n') {
                        self.i += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn expect_more(&self) -> Result<u8, Stop> {
        self.peek().ok_or(Stop::Eof)
    }

    fn value(&mut self, out: &mut String) -> Result<Kind, Stop> {
        self.ws();
        let c = self.expect_more()?;
        match c {
            b'[' => {
                self.i += 1;
                self.nested(|p| p.sequence(out, b']'))?;
                Ok(Kind::Other)
            }
            b'(' => {
                self.i += 1;
                self.nested(|p| p.parenthesized(out))
            }
            b'{' => {
                self.i += 1;
                self.nested(|p| p.braced(out))?;
                Ok(Kind::Other)
            }
            b'\'' | b'"' => {
                self.strings(out)?;
                Ok(Kind::Str)
            }
            b'-' | b'+' | b'0'..=b'9' => {
                self.number(out)?;
                Ok(Kind::Other)
            }
            b'.' => {
                // `.5` is a float; `...` is Ellipsis, which JSON cannot hold.
                if self.b.get(self.i + 1).is_some_and(u8::is_ascii_digit) {
                    self.number(out)?;
                    Ok(Kind::Other)
                } else {
                    Err(Stop::Invalid)
                }
            }
            c if is_ident(c) => self.word(out),
            _ => Err(Stop::Invalid),
        }
    }

    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, Stop>) -> Result<T, Stop> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Stop::Invalid);
        }
        let result = f(self);
        self.depth -= 1;
        result
    }

    /// Items up to `close` (the opener already taken), as a JSON array.
    fn sequence(&mut self, out: &mut String, close: u8) -> Result<(), Stop> {
        out.push('[');
        let mut first = true;
        loop {
            self.ws();
            if self.expect_more()? == close {
                self.i += 1;
                break;
            }
            if !first {
                out.push(',');
            }
            first = false;
            self.value(out)?;
            self.ws();
            match self.expect_more()? {
                b',' => self.i += 1,
                c if c == close => {
                    self.i += 1;
                    break;
                }
                _ => return Err(Stop::Invalid),
            }
        }
        out.push(']');
        Ok(())
    }

    /// `()`, `(x,)`, `(x, y)` are tuples; `(x)` is just `x`.
    fn parenthesized(&mut self, out: &mut String) -> Result<Kind, Stop> {
        self.ws();
        if self.expect_more()? == b')' {
            self.i += 1;
            out.push_str("[]");
            return Ok(Kind::Other);
        }
        let mark = out.len();
        let kind = self.value(out)?;
        self.ws();
        match self.expect_more()? {
            b')' => {
                self.i += 1;
                Ok(kind)
            }
            b',' => {
                self.i += 1;
                out.insert(mark, '[');
                // The rest of the tuple, as if it were the rest of a list.
                let rest_mark = out.len();
                self.sequence(out, b')')?;
                // `sequence` wrote `[` + rest + `]`: splice the rest after the first item.
                let rest: String = out[rest_mark + 1..].to_string();
                out.truncate(rest_mark);
                if rest != "]" {
                    out.push(',');
                }
                out.push_str(&rest);
                Ok(Kind::Other)
            }
            _ => Err(Stop::Invalid),
        }
    }

    /// `{}` (a dict), `{k: v, …}`, or a set `{a, b}`. Written straight into `out`: the opening
    /// `{` becomes `[` once the first item shows it is a set.
    fn braced(&mut self, out: &mut String) -> Result<(), Stop> {
        self.ws();
        if self.expect_more()? == b'}' {
            self.i += 1;
            out.push_str("{}");
            return Ok(());
        }
        let mark = out.len();
        out.push('{');
        let key_start = out.len();
        let kind = self.value(out)?;
        let key = key_start..out.len();
        self.ws();
        match self.expect_more()? {
            b':' => {
                if kind != Kind::Str {
                    return Err(Stop::Invalid);
                }
                self.i += 1;
                self.dict(out, key)
            }
            b',' | b'}' => {
                // A set: its items in the order the repr shows them.
                out.replace_range(mark..mark + 1, "[");
                if self.expect_more()? == b',' {
                    self.i += 1;
                    let rest_mark = out.len();
                    self.sequence(out, b'}')?;
                    let rest: String = out[rest_mark + 1..].to_string();
                    out.truncate(rest_mark);
                    if rest != "]" {
                        out.push(',');
                    }
                    out.push_str(&rest);
                } else {
                    self.i += 1;
                    out.push(']');
                }
                Ok(())
            }
            _ => Err(Stop::Invalid),
        }
    }

    /// The rest of a dict whose first key is already in `out` (at `first`) and whose `:` was
    /// taken.
    fn dict(&mut self, out: &mut String, first: Range<usize>) -> Result<(), Stop> {
        // Keys seen so far, by their JSON text: a set, because a dict of 200,000 keys compared
        // each new key with every earlier one for minutes.
        let mut keys: std::collections::HashSet<String> =
            std::collections::HashSet::from([out[first].to_string()]);
        out.push(':');
        loop {
            self.value(out)?;
            self.ws();
            match self.expect_more()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    break;
                }
                _ => return Err(Stop::Invalid),
            }
            self.ws();
            if self.expect_more()? == b'}' {
                self.i += 1;
                break;
            }
            out.push(',');
            let start = out.len();
            if self.value(out)? != Kind::Str {
                return Err(Stop::Invalid);
            }
            let key = start..out.len();
            // Python keeps the last value of a repeated key; a repr never repeats one.
            if !keys.insert(out[key].to_string()) {
                return Err(Stop::Invalid);
            }
            self.ws();
            if self.expect_more()? != b':' {
                return Err(Stop::Invalid);
            }
            self.i += 1;
            out.push(':');
        }
        out.push('}');
        Ok(())
    }

    /// `None`, `True`, `False`, `set()`, or a string with a prefix (`r'…'`, `u"…"`).
    fn word(&mut self, out: &mut String) -> Result<Kind, Stop> {
        let start = self.i;
        while self.peek().is_some_and(is_ident) {
            self.i += 1;
        }
        let word = &self.s[start..self.i];
        if matches!(self.peek(), Some(b'\'' | b'"')) {
            return match word {
                "r" | "R" | "u" | "U" => {
                    self.i = start;
                    self.strings(out)?;
                    Ok(Kind::Str)
                }
                // Bytes and f-strings: JSON has no bytes; f-strings are not literals.
                _ => Err(Stop::Invalid),
            };
        }
        match word {
            "None" => out.push_str("null"),
            "True" => out.push_str("true"),
            "False" => out.push_str("false"),
            "set" => {
                self.ws();
                if self.peek() != Some(b'(') {
                    return Err(Stop::Invalid);
                }
                self.i += 1;
                self.ws();
                if self.expect_more()? != b')' {
                    return Err(Stop::Invalid);
                }
                self.i += 1;
                out.push_str("[]");
            }
            _ if self.i == self.b.len() => return Err(Stop::Eof),
            _ => return Err(Stop::Invalid),
        }
        Ok(Kind::Other)
    }

    /// One or more adjacent string literals (Python concatenates them), as one JSON string.
    fn strings(&mut self, out: &mut String) -> Result<(), Stop> {
        // One buffer for every string of the literal.
        let mut text = std::mem::take(&mut self.scratch);
        text.clear();
        loop {
            if let Err(stop) = self.string(&mut text) {
                self.scratch = text;
                return Err(stop);
            }
            let after = self.i;
            self.ws();
            let prefixed = matches!(self.peek(), Some(b'r' | b'R' | b'u' | b'U'))
                && matches!(self.b.get(self.i + 1), Some(b'\'' | b'"'));
            if !(matches!(self.peek(), Some(b'\'' | b'"')) || prefixed) {
                self.i = after;
                break;
            }
        }
        push_json_string(out, &text);
        self.scratch = text;
        Ok(())
    }

    /// One string literal, decoded into `text`.
    fn string(&mut self, text: &mut String) -> Result<(), Stop> {
        let mut raw = false;
        match self.peek() {
            Some(b'r' | b'R') => {
                raw = true;
                self.i += 1;
            }
            Some(b'u' | b'U') => self.i += 1,
            _ => {}
        }
        let quote = self.expect_more()?;
        let triple =
            self.b.get(self.i + 1) == Some(&quote) && self.b.get(self.i + 2) == Some(&quote);
        self.i += if triple { 3 } else { 1 };
        loop {
            // Plain text up to the next quote, backslash or line break, in one piece.
            let plain = self.b[self.i..]
                .iter()
                .position(|&c| c == quote || c == b'\\' || c == b'\n' || c == b'\r')
                .ok_or(Stop::Eof)?;
            text.push_str(&self.s[self.i..self.i + plain]);
            self.i += plain;
            let c = self.expect_more()?;
            if c == quote {
                if !triple {
                    self.i += 1;
                    return Ok(());
                }
                if self.b.get(self.i + 1) == Some(&quote) && self.b.get(self.i + 2) == Some(&quote)
                {
                    self.i += 3;
                    return Ok(());
                }
            }
            match c {
                b'\n' | b'\r' if !triple => return Err(Stop::Invalid),
                // Python reads source line breaks in a triple-quoted string as `\n`.
                b'\r' => {
                    text.push('\n');
                    self.i += 1;
                    if self.peek() == Some(b'\n') {
                        self.i += 1;
                    }
                }
                b'\\' if raw => {
                    // In a raw string a backslash escapes nothing, but a quote after it does
                    // not end the string: both are kept.
                    text.push('\\');
                    self.i += 1;
                    let next = self.char_at()?;
                    text.push(next);
                    self.i += next.len_utf8();
                }
                b'\\' => {
                    self.i += 1;
                    self.escape(text)?;
                }
                _ => {
                    let ch = self.char_at()?;
                    text.push(ch);
                    self.i += ch.len_utf8();
                }
            }
        }
    }

    fn char_at(&self) -> Result<char, Stop> {
        self.s[self.i..].chars().next().ok_or(Stop::Eof)
    }

    fn hex(&mut self, digits: usize) -> Result<u32, Stop> {
        let end = self.i + digits;
        if end > self.b.len() {
            return Err(Stop::Eof);
        }
        let text = self.s.get(self.i..end).ok_or(Stop::Invalid)?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Stop::Invalid);
        }
        self.i = end;
        u32::from_str_radix(text, 16).map_err(|_| Stop::Invalid)
    }

    /// After a backslash in a normal string.
    fn escape(&mut self, text: &mut String) -> Result<(), Stop> {
        let c = self.char_at()?;
        self.i += c.len_utf8();
        let code = match c {
            '\n' => return Ok(()),
            '\r' => {
                if self.peek() == Some(b'\n') {
                    self.i += 1;
                }
                return Ok(());
            }
            '\\' | '\'' | '"' => c as u32,
            'a' => 0x07,
            'b' => 0x08,
            'f' => 0x0c,
            'n' => 0x0a,
            'r' => 0x0d,
            't' => 0x09,
            'v' => 0x0b,
            '0'..='7' => {
                let mut value = c as u32 - '0' as u32;
                for _ in 0..2 {
                    match self.peek() {
                        Some(d @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(d - b'0');
                            self.i += 1;
                        }
                        _ => break,
                    }
                }
                value
            }
            'x' => self.hex(2)?,
            'u' => self.hex(4)?,
            'U' => self.hex(8)?,
            // `\N{name}` needs Unicode's name table; refuse rather than guess.
            'N' => return Err(Stop::Invalid),
            other => {
                // Python keeps an unknown escape as written.
                text.push('\\');
                text.push(other);
                return Ok(());
            }
        };
        // Lone surrogates cannot be UTF-8 text.
        text.push(char::from_u32(code).ok_or(Stop::Invalid)?);
        Ok(())
    }

    /// A number with at most one unary sign, as JSON.
    fn number(&mut self, out: &mut String) -> Result<(), Stop> {
        let negative = match self.peek() {
            Some(b'-') => {
                self.i += 1;
                true
            }
            Some(b'+') => {
                self.i += 1;
                false
            }
            _ => false,
        };
        self.ws();
        let start = self.i;
        let c = self.expect_more()?;
        if !(c.is_ascii_digit() || c == b'.') {
            // `-(1)`, `--1`, `-x`: not a signed number literal.
            return Err(Stop::Invalid);
        }
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
        {
            let c = self.b[self.i];
            self.i += 1;
            // An exponent's sign belongs to the number.
            if (c == b'e' || c == b'E')
                && !self.s[start..self.i].starts_with("0x")
                && !self.s[start..self.i].starts_with("0X")
                && matches!(self.peek(), Some(b'+' | b'-'))
            {
                self.i += 1;
            }
        }
        if self.i == self.b.len() {
            // The number may go on past the cut.
            return Err(Stop::Eof);
        }
        let token = &self.s[start..self.i];
        write_number(out, token, negative)
    }
}

/// Digits with Python's underscores: single, between digits.
fn plain_digits(digits: &str, radix: u32) -> Option<String> {
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
    {
        return None;
    }
    let clean: String = digits.chars().filter(|&c| c != '_').collect();
    clean.chars().all(|c| c.is_digit(radix)).then_some(clean)
}

fn write_number(out: &mut String, token: &str, negative: bool) -> Result<(), Stop> {
    // The common forms, `123` and `41.13` (no leading zero, at most 17 digits), are already
    // JSON that reads as the same number: written as they are.
    let (whole, fraction) = token.split_once('.').unwrap_or((token, ""));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if token.len() <= 17
        && digits(whole)
        && (whole == "0" || !whole.starts_with('0'))
        && (fraction.is_empty() && !token.contains('.') || digits(fraction))
    {
        // `-0` is the int 0; `-0.0` is a float of its own, signed as in Python.
        if negative && (token.contains('.') || token.bytes().any(|b| b != b'0')) {
            out.push('-');
        }
        out.push_str(token);
        return Ok(());
    }
    let lower = token.to_ascii_lowercase();
    if lower.ends_with('j') {
        return Err(Stop::Invalid);
    }
    let radix = match lower.get(..2) {
        Some("0x") => Some(16),
        Some("0o") => Some(8),
        Some("0b") => Some(2),
        _ => None,
    };
    if let Some(radix) = radix {
        let digits = plain_digits(
            token.get(2..).unwrap_or_default().trim_start_matches('_'),
            radix,
        )
        .ok_or(Stop::Invalid)?;
        let value = u128::from_str_radix(&digits, radix).map_err(|_| Stop::Invalid)?;
        if negative && value != 0 {
            out.push('-');
        }
        out.push_str(&value.to_string());
        return Ok(());
    }
    if !lower.contains(['.', 'e']) {
        let digits = plain_digits(token, 10).ok_or(Stop::Invalid)?;
        let significant = digits.trim_start_matches('0');
        // `007` is a syntax error in Python 3; `000` is zero.
        if digits.len() > 1 && digits.starts_with('0') && !significant.is_empty() {
            return Err(Stop::Invalid);
        }
        if significant.is_empty() {
            out.push('0');
        } else {
            if negative {
                out.push('-');
            }
            out.push_str(significant);
        }
        return Ok(());
    }
    // A float: digits, optional fraction, optional exponent, underscores between digits.
    let (mantissa, exponent) = match lower.split_once('e') {
        Some((m, e)) => (m, Some(e)),
        None => (lower.as_str(), None),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (mantissa, None),
    };
    let whole = if whole.is_empty() {
        String::new()
    } else {
        plain_digits(whole, 10).ok_or(Stop::Invalid)?
    };
    let fraction = match fraction {
        Some("") | None => String::new(),
        Some(f) => plain_digits(f, 10).ok_or(Stop::Invalid)?,
    };
    if whole.is_empty() && fraction.is_empty() {
        return Err(Stop::Invalid);
    }
    let exponent = match exponent {
        None => String::new(),
        Some(e) => {
            let (sign, digits) = match e.as_bytes().first() {
                Some(b'+' | b'-') => (&e[..1], &e[1..]),
                _ => ("", e),
            };
            format!("e{sign}{}", plain_digits(digits, 10).ok_or(Stop::Invalid)?)
        }
    };
    let text = format!(
        "{}{}.{}{exponent}",
        if negative { "-" } else { "" },
        if whole.is_empty() { "0" } else { &whole },
        if fraction.is_empty() { "0" } else { &fraction },
    );
    let value: f64 = text.parse().map_err(|_| Stop::Invalid)?;
    let number = serde_json::Number::from_f64(value).ok_or(Stop::Invalid)?;
    let written = number.to_string();
    // ryu writes integral floats as `1e16` without a dot; ingest must still see a float.
    if written.contains(['.', 'e', 'E']) {
        out.push_str(&written);
    } else {
        out.push_str(&written);
        out.push_str(".0");
    }
    Ok(())
}

/// Parse one literal starting at `at`; the JSON and where it ended.
pub(crate) fn literal_to_json(text: &str, at: usize) -> Result<(String, usize), Stop> {
    let mut parser = Parser::new(text, at);
    let mut out = String::new();
    parser.value(&mut out)?;
    Ok((out, parser.i))
}

/// A top-level list read item by item, so a cut one can be dropped: the JSON of the items before
/// the cut, where they end, and the cut (if any).
fn top_list(body: &str, at: usize) -> Result<(String, usize, Option<Torn>), Stop> {
    let mut parser = Parser::new(body, at + 1);
    parser.depth = 1;
    let mut out = String::from("[");
    let mut items = 0;
    let mut end_of_last = at + 1;
    loop {
        parser.ws();
        let Some(c) = parser.peek() else {
            let torn = Torn {
                span: end_of_last..body.len(),
                rows: 0,
                reason: "the list was not closed (cut off after a complete row)",
            };
            return if items > 0 {
                out.push(']');
                Ok((out, end_of_last, Some(torn)))
            } else {
                Err(Stop::Eof)
            };
        };
        if c == b']' {
            out.push(']');
            return Ok((out, parser.i + 1, None));
        }
        let mark = out.len();
        if items > 0 {
            out.push(',');
        }
        match parser.value(&mut out) {
            Ok(_) => {
                items += 1;
                end_of_last = parser.i;
            }
            Err(Stop::Eof) if items > 0 => {
                out.truncate(mark);
                out.push(']');
                let torn = Torn {
                    span: end_of_last..body.len(),
                    rows: 1,
                    reason: "the text stops inside the last row (cut off)",
                };
                return Ok((out, end_of_last, Some(torn)));
            }
            Err(stop) => return Err(stop),
        }
        parser.ws();
        match parser.peek() {
            Some(b',') => parser.i += 1,
            Some(b']') => {
                out.push(']');
                return Ok((out, parser.i + 1, None));
            }
            // The end of the text right after an item: the loop reports the unclosed list.
            None => {}
            Some(_) => return Err(Stop::Invalid),
        }
    }
}

fn opens_literal(line: &str) -> bool {
    matches!(
        line.trim_start().as_bytes().first(),
        Some(b'[' | b'(' | b'{')
    )
}

pub(crate) fn find(body: &str, _truncated: bool) -> Option<Found> {
    // A cut text ends wherever the cut fell; what a marker's writer put after it (line breaks)
    // must not read as part of a string that was cut open.
    let body = body.trim_end();
    frame::table_starts(body, |line| !opens_literal(line))
        .into_iter()
        .find_map(|start| read(body, start))
}

fn read(body: &str, start: usize) -> Option<Found> {
    let rest = body.get(start..)?;
    let at = start + (rest.len() - rest.trim_start().len());
    let (json, end, torn) = match body.as_bytes().get(at)? {
        b'[' => top_list(body, at).ok()?,
        b'(' | b'{' => {
            let (json, end) = literal_to_json(body, at).ok()?;
            (json, end, None)
        }
        _ => return None,
    };
    let raw: Box<RawValue> = serde_json::from_str(&json).ok()?;
    let located = locate::in_structured(raw.get())?;
    let several = located.tables.len() > 1;
    let tables = located
        .tables
        .into_iter()
        .map(|t| TextTable {
            path: (several || t.path != "$").then(|| t.path.clone()),
            rows: t.rows.into_owned(),
        })
        .collect();
    let span = at..end;
    Some(Found {
        rung: Rung::PythonRepr,
        spans: vec![span],
        tables,
        context: located.context,
        torn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn json_of(text: &str) -> Value {
        let (json, _) = literal_to_json(text, 0).expect("literal");
        serde_json::from_str(&json).expect("json")
    }

    fn fails(text: &str) -> Stop {
        literal_to_json(text, 0).expect_err(text)
    }

    #[test]
    fn scalars_like_literal_eval() {
        assert_eq!(json_of("None "), json!(null));
        assert_eq!(json_of("[True, False]"), json!([true, false]));
        assert_eq!(
            json_of("[1, -2, +3, 1_000, 0x1F, 0o17, 0b101, 000]"),
            json!([1, -2, 3, 1000, 31, 15, 5, 0])
        );
        assert_eq!(
            json_of("[1.5, -0.25, 1e5, 1.5E-7, 5., .5, 1_0.5]"),
            json!([1.5, -0.25, 100000.0, 1.5e-7, 5.0, 0.5, 10.5])
        );
        let (big, _) = literal_to_json("[123456789012345678901234567890]", 0).expect("big");
        assert_eq!(big, "[123456789012345678901234567890]");
    }

    #[test]
    fn strings_with_every_quoting() {
        assert_eq!(
            json_of(
                r#"['it\'s', "say \"hi\"", "it's", 'a\\b', '\x41\u00e9\U0001F600', '\101\0', r'C:\new\'', 'x' "y", '''tri'ple''', 'caf\u00e9', 'é', '\q']"#
            ),
            json!([
                "it's",
                "say \"hi\"",
                "it's",
                "a\\b",
                "Aé😀",
                "A\u{0}",
                "C:\\new\\'",
                "xy",
                "tri'ple",
                "café",
                "é",
                "\\q"
            ])
        );
    }

    #[test]
    fn containers() {
        assert_eq!(
            json_of(
                "{'a': (1, 2), 'b': (3,), 'c': (), 'd': (4), 'e': {1, 2}, 'f': set(), 'g': {}}"
            ),
            json!({"a": [1, 2], "b": [3], "c": [], "d": 4, "e": [1, 2], "f": [], "g": {}})
        );
        assert_eq!(
            json_of("[\n  {'a': 1},  # first\n  {'a': 2},\n]"),
            json!([{"a": 1}, {"a": 2}])
        );
    }

    #[test]
    fn what_literal_eval_refuses_or_json_cannot_hold() {
        for text in [
            "[nan]",
            "[inf]",
            "[datetime.date(2024, 1, 1)]",
            "[b'x']",
            "[f'x']",
            "[1j]",
            "[...]",
            "[--1]",
            "[007]",
            "[1__0]",
            "[{1: 'a'}]",
            "[{'a': 1, 'a': 2}]",
            "['\\N{BULLET}']",
            "['\\ud800']",
            "['a\nb']",
            "[1e400]",
            "[x]",
            "[1 2]",
            "[,]",
            "{'a' 1}",
        ] {
            assert_eq!(fails(text), Stop::Invalid, "{text}");
        }
        for text in ["[{'a': 1}, {'a'", "['abc", "[1, 2", "[Tru"] {
            assert_eq!(fails(text), Stop::Eof, "{text}");
        }
        let deep = "[".repeat(500);
        assert_eq!(fails(&deep), Stop::Invalid);
    }

    #[test]
    fn a_list_of_dicts_is_a_table_and_tuples_are_not() {
        let text = "[{'faa': '04G', 'lat': 41.13, 'tzone': None}, {'faa': '06A', 'lat': 32.46, 'tzone': 'America/Chicago'}]";
        let found = find(text, false).expect("table");
        let rows: Value = serde_json::from_str(&found.tables[0].rows).expect("rows");
        assert_eq!(rows[0], json!({"faa": "04G", "lat": 41.13, "tzone": null}));
        assert_eq!(found.spans, vec![0..text.len()]);
        assert!(find("[('04G', 41.13), ('06A', 32.46)]", false).is_none());
        assert!(find("[]", false).is_none());
    }

    #[test]
    fn a_dict_around_the_rows_gives_context() {
        let found = find("{'total': 2, 'rows': [{'a': 1}, {'a': 2}]}", false).expect("table");
        assert_eq!(found.tables[0].path.as_deref(), Some("rows"));
        assert_eq!(found.context["total"], 2);
    }

    #[test]
    fn a_cut_list_keeps_whole_rows_and_reports_the_cut() {
        let text = "[{'a': 1}, {'a': 2}, {'a': 'thr";
        let found = find(text, false).expect("table");
        let rows: Value = serde_json::from_str(&found.tables[0].rows).expect("rows");
        assert_eq!(rows, json!([{"a": 1}, {"a": 2}]));
        let torn = found.torn.expect("torn");
        assert_eq!((torn.span, torn.rows), (19..text.len(), 1));
        let found = find("[{'a': 1}, {'a': 2},", false).expect("table");
        assert_eq!(found.torn.expect("torn").rows, 0);
    }
}
