use super::*;
use proptest::prelude::*;
use std::cell::Cell;

fn loom_marker(o: &Omitted) -> String {
    format!(
        "[loom: {} chars (lines {}–{}) left out; loom_read(\"doc_4\", offset: {}, length: {})]",
        o.length, o.first_line, o.last_line, o.offset, o.length
    )
}

/// Cuts and checks the contract; returns the output and what was left out.
fn cut_checked(text: &str, max: usize, keep: Keep) -> Option<(String, Omitted)> {
    let last = Cell::new(None);
    let worst = Cell::new(0usize);
    let out = cut_to_budget(text, max, keep, &|o| {
        let m = loom_marker(o);
        if worst.get() == 0 {
            worst.set(m.chars().count());
        }
        last.set(Some(*o));
        m
    });
    let total = text.chars().count();
    let Some(out) = out else {
        assert!(total <= max);
        return None;
    };
    assert!(total > max);
    let o = last.get().expect("the marker was asked for");
    let chars: Vec<char> = text.chars().collect();
    assert!(o.length >= 1);
    assert!(o.offset + o.length <= total);
    let head: String = chars[..o.offset].iter().collect();
    let omitted: String = chars[o.offset..o.offset + o.length].iter().collect();
    let tail: String = chars[o.offset + o.length..].iter().collect();
    assert_eq!(format!("{head}{omitted}{tail}"), text);
    let m = loom_marker(&o);
    let before = if !head.is_empty() && !head.ends_with('\n') {
        "\n"
    } else {
        ""
    };
    let after = if tail.is_empty() { "" } else { "\n" };
    assert_eq!(out, format!("{head}{before}{m}{after}{tail}"));
    if keep == Keep::HeadOnly {
        assert!(tail.is_empty());
    }
    // Lines, counted the slow way.
    let line_of = |cp: usize| chars[..cp].iter().filter(|&&c| c == '\n').count() + 1;
    assert_eq!(o.first_line, line_of(o.offset));
    assert_eq!(o.last_line, line_of(o.offset + o.length - 1));
    if max >= worst.get() + MARKER_SLACK {
        assert!(
            out.chars().count() <= max,
            "{} > {max}",
            out.chars().count()
        );
    }
    Some((out, o))
}

fn log(lines: usize) -> String {
    (1..=lines)
        .map(|i| format!("2025-01-01T00:00:{:02} INFO step {i} done\n", i % 60))
        .collect()
}

#[test]
fn fits_means_none() {
    assert!(cut_checked("short", 5, Keep::HeadOnly).is_none());
    assert!(cut_checked("", 0, Keep::HeadAndTail).is_none());
}

#[test]
fn head_and_tail_at_line_boundaries() {
    let text = log(2000);
    let (out, o) = cut_checked(&text, 4000, Keep::HeadAndTail).expect("cut");
    let kept = text.chars().count() - o.length;
    let head_share = o.offset as f64 / kept as f64;
    assert!((0.70..=0.80).contains(&head_share), "{head_share}");
    assert!(out.starts_with("2025-01-01T00:00:01 INFO step 1 done\n"));
    assert!(out.ends_with("INFO step 2000 done\n"));
    // Every kept line is whole.
    for line in out.lines() {
        assert!(
            line.starts_with("[loom:") || line.ends_with(" done"),
            "{line}"
        );
    }
    assert!(out.contains(&format!(
        "\n[loom: {} chars (lines {}–{}) left out; loom_read(\"doc_4\", offset: {}, length: {})]\n",
        o.length, o.first_line, o.last_line, o.offset, o.length
    )));
}

#[test]
fn head_only_prefers_a_near_paragraph_break() {
    let para = "Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n".repeat(4);
    let text = format!("{para}\n{para}\n{para}\n{para}");
    // The budget ends inside the third paragraph's last line.
    let (out, o) = cut_checked(&text, 3 * para.len() + 150, Keep::HeadOnly).expect("cut");
    assert!(
        out.starts_with(&format!("{para}\n{para}\n{para}\n[loom:")),
        "{out}"
    );
    assert_eq!(o.first_line, 16);
    // Too far back: a line cut instead.
    let long = "Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n".repeat(40);
    let text = format!("{para}\n{long}");
    let (out, _) = cut_checked(&text, 1500, Keep::HeadOnly).expect("cut");
    assert!(out.len() > 1200 && out.contains("elit.\n[loom:"));
}

#[test]
fn one_long_line_is_cut_inside_at_a_space() {
    let text = "word ".repeat(10_000);
    let (out, o) = cut_checked(&text, 1000, Keep::HeadAndTail).expect("cut");
    let head: String = text.chars().take(o.offset).collect();
    assert!(head.ends_with("word "), "{head:?}");
    assert!(o.offset > 600);
    assert!(out.ends_with("word "));
    assert!(out.chars().count() <= 1000);
    let json = format!(
        "{{\"items\":[{}]}}",
        "{\"id\":12345,\"name\":\"x\"},".repeat(5000)
    );
    let (_, o) = cut_checked(&json, 2000, Keep::HeadOnly).expect("cut");
    let head: String = json.chars().take(o.offset).collect();
    assert!(
        head.ends_with(['}', ',', ':']),
        "{}",
        &head[head.len() - 20..]
    );
}

#[test]
fn one_line_without_breaks_is_cut_at_a_char_boundary() {
    let text = "é".repeat(5000);
    let (out, o) = cut_checked(&text, 500, Keep::HeadAndTail).expect("cut");
    assert!(out.chars().count() <= 500);
    assert!(o.offset > 300);
}

#[test]
fn emoji_sequences_are_not_split() {
    let family = "👨\u{200D}👩\u{200D}👧\u{200D}👦";
    let text = family.repeat(1000);
    for max in [300, 301, 302, 303, 350, 777] {
        for keep in [Keep::HeadAndTail, Keep::HeadOnly] {
            let (_, o) = cut_checked(&text, max, keep).expect("cut");
            assert_eq!(o.offset % 7, 0, "max {max}");
            assert_eq!((o.offset + o.length) % 7, 0, "max {max}");
        }
    }
    let flags = "🇫🇷🇩🇪🇯🇵".repeat(500);
    for max in [300, 301, 302] {
        let (_, o) = cut_checked(&flags, max, Keep::HeadAndTail).expect("cut");
        assert_eq!(o.offset % 2, 0);
        assert_eq!((o.offset + o.length) % 2, 0);
    }
    let accents = "e\u{301}".repeat(2000);
    let (_, o) = cut_checked(&accents, 301, Keep::HeadOnly).expect("cut");
    assert_eq!(o.offset % 2, 0);
}

#[test]
fn tiny_budgets_still_leave_a_marker() {
    let text = log(100);
    let marker_len = loom_marker(&Omitted {
        offset: 9999,
        length: 9999,
        first_line: 100,
        last_line: 100,
    })
    .chars()
    .count();
    for max in [
        0,
        1,
        10,
        marker_len,
        marker_len + 1,
        marker_len + 2,
        marker_len + 3,
    ] {
        for keep in [Keep::HeadAndTail, Keep::HeadOnly] {
            let (out, _) = cut_checked(&text, max, keep).expect("cut");
            assert!(out.contains("[loom:"));
        }
    }
}

#[test]
fn crlf_is_not_split_inside_a_long_line() {
    let text = format!("{}\r\n{}", "a".repeat(1000), "b".repeat(1000));
    for max in (100..140).chain(1000..1800) {
        for keep in [Keep::HeadAndTail, Keep::HeadOnly] {
            let (_, o) = cut_checked(&text, max, keep).expect("cut");
            assert_ne!(o.offset, 1001);
            assert_ne!(o.offset + o.length, 1001);
        }
    }
}

#[test]
fn crlf_and_missing_final_newline() {
    let text = "a\r\nb\r\n".repeat(500) + "end";
    let (out, o) = cut_checked(&text, 300, Keep::HeadAndTail).expect("cut");
    assert!(out.ends_with("b\r\nend"));
    assert!(out.contains("\r\n[loom:"));
    assert!(o.last_line < 1001);
}

/// Lines of random Unicode (including emoji, marks, CR, blank lines) of random lengths.
fn texts() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        3 => "[a-z ,.]{0,40}",
        2 => any::<String>(),
        1 => "[\u{1F468}\u{200D}\u{301}\u{1F1E6}-\u{1F1FF}é\r ]{0,20}",
        1 => Just(String::new()),
        1 => "[a-z ]{200,2000}",
    ];
    (prop::collection::vec(line, 0..60), any::<bool>())
        .prop_map(|(lines, end)| lines.join("\n") + if end { "\n" } else { "" })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn cut_reconstructs_and_fits(text in texts(), frac in 0.0f64..1.2, small in 0usize..200, head in any::<bool>()) {
        let total = text.chars().count();
        let max = if small % 3 == 0 { small } else { (total as f64 * frac) as usize };
        let keep = if head { Keep::HeadOnly } else { Keep::HeadAndTail };
        cut_checked(&text, max, keep);
    }
}
