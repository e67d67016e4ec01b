use super::*;
use std::path::PathBuf;
use std::time::Instant;

fn reduce(html: &str) -> PageReduction {
    match reduce_page(html, &mut |_, _| None) {
        Ok(reduction) => reduction,
        Err(e) => panic!("reduce_page failed: {e}"),
    }
}

/// Markdown read back as text, so sentences can be compared whatever markup surrounds them.
fn markdown_to_plain(markdown: &str) -> String {
    let mut lines = Vec::new();
    for line in markdown.lines() {
        let mut line = line.trim_start();
        if line.starts_with("```") {
            continue;
        }
        loop {
            let before = line;
            line = line.trim_start_matches('>').trim_start();
            line = line.trim_start_matches('#').trim_start();
            if let Some(rest) = line.strip_prefix("- ") {
                line = rest;
            }
            let digits = line.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 && line[digits..].starts_with(". ") {
                line = &line[digits + 2..];
            }
            if line == before {
                break;
            }
        }
        lines.push(line);
    }
    let joined = lines.join("\n");
    let mut without_targets = String::new();
    let mut rest = joined.as_str();
    while let Some(at) = rest.find("](") {
        without_targets.push_str(&rest[..at]);
        let mut depth = 0usize;
        let mut end = rest.len();
        for (i, c) in rest[at + 1..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = at + 1 + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &rest[end..];
    }
    without_targets.push_str(rest);
    comparable(&without_targets.replace("<br>", " "))
}

fn comparable(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .filter(|c| !matches!(c, '*' | '`' | '\\' | '[' | ']' | '|' | '¶'))
        .collect();
    collapse_whitespace(&cleaned)
}

struct Expectation {
    sentences: Vec<String>,
    absent: Vec<String>,
    max_ratio: f64,
}

fn pages_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/html/pages")
}

fn corpus() -> Vec<(String, String, Expectation)> {
    let mut names: Vec<String> = std::fs::read_dir(pages_dir())
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_suffix(".html"))
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    assert!(names.len() >= 6, "corpus missing from {:?}", pages_dir());
    names
        .into_iter()
        .map(|name| {
            let html = std::fs::read_to_string(pages_dir().join(format!("{name}.html")))
                .unwrap_or_default();
            let raw = std::fs::read_to_string(pages_dir().join(format!("{name}.expect.json")))
                .unwrap_or_default();
            let json: serde_json::Value = serde_json::from_str(&raw).unwrap_or_default();
            let strings = |key: &str| -> Vec<String> {
                json[key]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let expectation = Expectation {
                sentences: strings("sentences"),
                absent: strings("absent"),
                max_ratio: json["max_ratio_to_main_text"].as_f64().unwrap_or(1.25),
            };
            assert!(
                (8..=15).contains(&expectation.sentences.len()),
                "{name}: 8–15 sentences expected"
            );
            assert!(
                expectation.absent.len() >= 5,
                "{name}: 5+ absent strings expected"
            );
            (name, html, expectation)
        })
        .collect()
}

fn kept_sentences(reduction: &PageReduction, sentences: &[String]) -> Vec<bool> {
    let plain = markdown_to_plain(&reduction.markdown);
    sentences
        .iter()
        .map(|s| plain.contains(&comparable(s)))
        .collect()
}

#[test]
fn corpus_pages_meet_their_expectations() {
    for (name, html, expect) in corpus() {
        let reduction = reduce(&html);
        assert!(
            reduction.main_content_only,
            "{name}: fell back to the whole page"
        );
        for (sentence, kept) in expect
            .sentences
            .iter()
            .zip(kept_sentences(&reduction, &expect.sentences))
        {
            assert!(kept, "{name}: sentence lost: {sentence}");
        }
        for chrome in &expect.absent {
            assert!(
                !reduction.markdown.contains(chrome.as_str()),
                "{name}: chrome kept: {chrome}"
            );
        }
        let ratio = reduction.markdown.chars().count() as f64 / reduction.main_text_chars as f64;
        assert!(
            ratio <= expect.max_ratio,
            "{name}: markdown is {ratio:.2}× the main text"
        );
    }
}

#[test]
fn corpus_fidelity_table() {
    println!(
        "{:<22} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6} {:>6} {:>8}",
        "page", "html", "page txt", "main txt", "markdown", "reduce", "md/txt", "kept", "method"
    );
    for (name, html, expect) in corpus() {
        let reduction = reduce(&html);
        let kept = kept_sentences(&reduction, &expect.sentences)
            .iter()
            .filter(|k| **k)
            .count();
        let md_chars = reduction.markdown.chars().count();
        let html_chars = html.chars().count();
        println!(
            "{:<22} {:>9} {:>9} {:>9} {:>9} {:>6.1}% {:>6.2} {:>3}/{:<2} {:?}",
            name,
            html_chars,
            reduction.page_text_chars,
            reduction.main_text_chars,
            md_chars,
            100.0 * (1.0 - md_chars as f64 / html_chars as f64),
            md_chars as f64 / reduction.main_text_chars as f64,
            kept,
            expect.sentences.len(),
            reduction.method
        );
    }
}

#[test]
fn detection_decides_by_markup() {
    assert!(looks_like_html(
        "<!DOCTYPE html><html><head><title>t</title></head><body><p>x</p></body></html>"
    ));
    assert!(looks_like_html(
        "\u{feff}  <!-- generated -->\n<html lang=\"en\"><body>hi</body></html>"
    ));
    assert!(looks_like_html(
        "<?xml version=\"1.0\"?>\n<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\"></html>"
    ));
    assert!(looks_like_html(
        "<div class=\"post\"><h2>Release notes</h2><p>Fixed the <b>parser</b> crash.</p><ul><li>one</li><li>two</li></ul></div>"
    ));
    assert!(looks_like_html(
        "<p>First paragraph of a fragment.</p>\n<p>Second paragraph, <a href=\"/x\">with a link</a>.</p>"
    ));

    assert!(!looks_like_html(
        "# Title\n\nSome *Markdown* text.<br>\nAnother line with `code`.\n\n- item\n- item\n"
    ));
    assert!(!looks_like_html(
        r#"{"html": "<div>hello</div>", "status": 200, "items": ["<p>", "</p>"]}"#
    ));
    assert!(!looks_like_html(
        "2024-05-01T10:00:00Z WARN upstream returned <html> instead of JSON (status 502)"
    ));
    assert!(!looks_like_html(
        "export function App() {\n  const items = load();\n  return (<div className=\"app\"><h1>{title}</h1><ul>{items.map(i => <li>{i}</li>)}</ul></div>);\n}\n"
    ));
    assert!(!looks_like_html(
        "<?xml version=\"1.0\"?><rss><channel><title>Feed</title><item><title>a</title><link>http://x</link></item></channel></rss>"
    ));
    assert!(!looks_like_html(
        "Use a <br> to break a line, and <p> for paragraphs."
    ));
    assert!(!looks_like_html(""));
}

#[test]
fn chrome_is_stripped_from_a_news_layout() {
    let html =
        std::fs::read_to_string(pages_dir().join("news_blog_layout.html")).unwrap_or_default();
    let reduction = reduce(&html);
    assert_eq!(reduction.method, ReductionMethod::Landmark);
    assert!(reduction.main_content_only);
    assert_eq!(
        reduction.title.as_deref(),
        Some("City council approves riverside bike lanes | The Harbor Gazette")
    );
    let md = &reduction.markdown;
    assert!(
        md.starts_with("Transport\n\n# City council approves riverside bike lanes"),
        "{md}"
    );
    for chrome in [
        "cookies",
        "Subscribe",
        "Trending",
        "Harbor FC",
        "Privacy policy",
        "Search the Gazette",
        "Share on social media",
    ] {
        assert!(!md.contains(chrome), "kept chrome {chrome:?} in:\n{md}");
    }
    assert!(
        md.contains("|\n\n> “This is the most important safety decision"),
        "{md}"
    );
    assert!(md.contains("- A two-way cycle track on the river side"));
    assert!(md.contains("[consult.example.org/riverside](https://consult.example.org/riverside)"));
}

#[test]
fn data_tables_become_gfm_and_are_reported() {
    let html = "<html><body><main><p>Intro.</p><table><caption>Prices</caption>\
        <thead><tr><th>Item</th><th>Price | EUR</th></tr></thead>\
        <tbody><tr><td>Tea</td><td>2.50</td></tr><tr><td><a href=\"https://x.example/c\">Coffee</a></td><td>3.10</td></tr></tbody>\
        </table><p>Outro.</p></main></body></html>";
    let reduction = reduce(html);
    let expected = "Intro.\n\nPrices\n\n| Item | Price \\| EUR |\n| --- | --- |\n| Tea | 2.50 |\n| [Coffee](https://x.example/c) | 3.10 |\n\nOutro.";
    assert_eq!(reduction.markdown, expected);
    assert_eq!(
        reduction.tables,
        vec![HtmlTable {
            caption: Some("Prices".into()),
            header: vec!["Item".into(), "Price | EUR".into()],
            rows: vec![
                vec!["Tea".into(), "2.50".into()],
                vec!["Coffee".into(), "3.10".into()]
            ],
        }]
    );
}

#[test]
fn spans_fill_the_grid_and_headerless_tables_use_their_first_row() {
    let html = "<main><table>\
        <tr><td>Region</td><td>Q1</td><td>Q2</td></tr>\
        <tr><td rowspan=\"2\">North</td><td>1</td><td>2</td></tr>\
        <tr><td colspan=\"2\">n/a</td></tr></table></main>";
    let reduction = reduce(html);
    assert_eq!(reduction.tables.len(), 1);
    assert_eq!(reduction.tables[0].header, vec!["Region", "Q1", "Q2"]);
    assert_eq!(
        reduction.tables[0].rows,
        vec![vec!["North", "1", "2"], vec!["North", "n/a", ""]]
    );
    assert!(
        reduction.markdown.contains("| North | n/a |  |"),
        "{}",
        reduction.markdown
    );
}

#[test]
fn layout_and_ragged_tables_stay_text() {
    let layout = "<main><table><tr><td><h2>Column one</h2><p>First long paragraph.</p></td><td><p>a</p><p>b</p></td></tr>\
        <tr><td>x</td><td>y</td></tr><tr><td>z</td><td>w</td></tr></table></main>";
    let nested = "<main><table><tr><td><table><tr><td>in</td><td>ner</td></tr></table></td><td>b</td></tr>\
        <tr><td>c</td><td>d</td></tr><tr><td>e</td><td>f</td></tr></table></main>";
    let ragged = "<main><table><tr><td>a</td><td>b</td></tr><tr><td>c</td></tr><tr><td>d</td><td>e</td><td>f</td></tr></table></main>";
    let single_row =
        "<main><table><tr><th>a</th><th>b</th></tr><tr><td>c</td><td>d</td></tr></table></main>";
    for html in [layout, nested, ragged, single_row] {
        let reduction = reduce(html);
        assert!(reduction.tables.is_empty(), "{html}");
        assert!(
            !reduction.markdown.contains("| --- |"),
            "{}",
            reduction.markdown
        );
    }
    let reduction = reduce(layout);
    assert!(
        reduction
            .markdown
            .contains("## Column one\n\nFirst long paragraph."),
        "{}",
        reduction.markdown
    );
}

#[test]
fn table_note_follows_its_table() {
    let html = "<main><p>Before.</p><table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr><tr><td>b</td><td>2</td></tr></table>\
        <p>Between.</p><table><tr><th>x</th><th>y</th></tr><tr><td>c</td><td>3</td></tr><tr><td>d</td><td>4</td></tr></table></main>";
    let mut seen = Vec::new();
    let reduction = reduce_page(html, &mut |index, table| {
        seen.push((index, table.rows.len()));
        Some(format!("(this table is dataset ds_{index})"))
    });
    let Ok(reduction) = reduction else {
        panic!("reduce_page failed")
    };
    assert_eq!(seen, vec![(0, 2), (1, 2)]);
    assert!(
        reduction
            .markdown
            .contains("| b | 2 |\n\n(this table is dataset ds_0)\n\nBetween."),
        "{}",
        reduction.markdown
    );
    assert!(
        reduction
            .markdown
            .ends_with("| d | 4 |\n\n(this table is dataset ds_1)"),
        "{}",
        reduction.markdown
    );
}

#[test]
fn code_blocks_are_fenced_with_their_exact_text() {
    let html = "<main><p>Run:</p><div class=\"highlight-python3\"><pre><span class=\"k\">def</span> f(x):\n    \
        return x &lt; 3 &amp;&amp; ```ok```\n\n\n    # blank lines kept\n</pre></div>\
        <ul><li>In a list:<pre>  indented\nline</pre></li></ul><p>Inline <code>a  |  b</code> code.</p></main>";
    let reduction = reduce(html);
    let expected = "Run:\n\n````python3\ndef f(x):\n    return x < 3 && ```ok```\n\n\n    # blank lines kept\n````\n\n\
        - In a list:\n\n  ```\n    indented\n  line\n  ```\n\nInline `a | b` code.";
    assert_eq!(reduction.markdown, expected);
}

#[test]
fn links_keep_targets_but_not_page_furniture() {
    let html = "<main><h2 id=\"s\">Section<a class=\"headerlink\" href=\"#s\" title=\"Permalink\">¶</a></h2>\
        <p>See <a href=\"#later\">below</a>, <a href=\"https://example.org/a b\" title=\"long title\">the spec</a>, \
        <a href=\"javascript:void(0)\">this</a> and <a href=\"../other.html\"><em>that</em></a>.</p></main>";
    let reduction = reduce(html);
    assert_eq!(
        reduction.markdown,
        "## Section\n\nSee below, [the spec](<https://example.org/a b>), this and [*that*](../other.html)."
    );
}

#[test]
fn over_stripping_falls_back_to_the_body() {
    // The <main> landmark holds a teaser; the article prose sits outside it.
    let paragraph = "This paragraph belongs to the real article and carries a full sentence of text. It must survive the reduction.";
    let html = format!(
        "<html><body><nav><a href='/'>Home</a></nav><main><p>Teaser.</p></main>\
         <div class='story'><p>{paragraph}</p><p>{paragraph}</p><p>{paragraph}</p><p>{paragraph}</p></div>\
         <footer>Footer links and copyright.</footer></body></html>"
    );
    let reduction = reduce(&html);
    assert!(!reduction.main_content_only);
    assert_eq!(reduction.method, ReductionMethod::WholeBody);
    assert!(reduction.markdown.contains("Teaser."));
    assert_eq!(reduction.markdown.matches(paragraph).count(), 4);
    assert!(!reduction.markdown.contains("Home"));
    assert!(!reduction.markdown.contains("Footer links"));
}

#[test]
fn pages_without_landmarks_use_the_readability_scorer() {
    let sentence = |i: usize| {
        format!(
            "Sentence number {i} of the story explains one more detail, with commas, so it scores as prose."
        )
    };
    let story: String = (0..12)
        .map(|i| format!("<p>{} {}</p>", sentence(2 * i), sentence(2 * i + 1)))
        .collect();
    let html = format!(
        "<html><head><title>Story</title></head><body><div id='top'><div class='menu'><a href='/a'>Alpha section</a> <a href='/b'>Beta section</a></div></div>\
         <div id='wrap'><div id='content'><div class='post'><h1>Headline</h1>{story}</div></div>\
         <div class='sidebar'><div class='widget'><a href='/c'>Gamma link</a><a href='/d'>Delta link</a></div></div></div></body></html>"
    );
    let reduction = reduce(&html);
    assert_eq!(
        reduction.method,
        ReductionMethod::Readability,
        "{}",
        reduction.markdown
    );
    assert!(reduction.main_content_only);
    for i in 0..24 {
        assert!(
            reduction.markdown.contains(&sentence(i)),
            "lost sentence {i}"
        );
    }
    assert!(
        !reduction.markdown.contains("Alpha section"),
        "{}",
        reduction.markdown
    );
}

fn nested(open: &str, close: &str, depth: usize) -> String {
    format!(
        "<html><body><main>{}deep text{}</main></body></html>",
        open.repeat(depth),
        close.repeat(depth)
    )
}

#[test]
fn deep_nesting_degrades_to_flat_text_without_recursing() {
    for (open, close) in [
        ("<div>", "</div>"),
        ("<ul><li>", "</li></ul>"),
        ("<table><tr><td>", "</td></tr></table>"),
        ("<b>", "</b>"),
        ("<div>", ""),
    ] {
        let html = nested(open, close, 100_000);
        // Flat text means the pre-scan refused the tree before html5ever built it; how long
        // that takes is measured in benches/bounds.rs (html_hostile).
        let reduction = reduce(&html);
        assert_eq!(reduction.method, ReductionMethod::FlatText, "{open}");
        assert_eq!(reduction.markdown, "deep text");
    }
}

#[test]
fn nesting_just_under_the_limit_is_parsed_on_a_small_stack() {
    // Test threads have 2 MiB stacks: every pass over the tree must be iterative.
    for (open, close) in [
        ("<div>", "</div>"),
        ("<ul><li>", "</li></ul>"),
        ("<blockquote>", "</blockquote>"),
        ("<span>", "</span>"),
        ("<table><tr><td>", "</td></tr></table>"),
    ] {
        // A bare cell also opens the <tbody> the parser implies.
        let levels = MAX_NESTING_DEPTH
            / (open.matches('<').count() + usize::from(open.contains("<table>")))
            - 10;
        let reduction = reduce(&nested(open, close, levels));
        assert_ne!(reduction.method, ReductionMethod::FlatText, "{open}");
        assert!(reduction.markdown.contains("deep text"), "{open}");
    }
    // Formatting elements are bounded by how many may stay open, not by depth.
    let emphasis = reduce(&nested("<em>", "</em>", MAX_ACTIVE_FORMATTING - 10));
    assert_ne!(emphasis.method, ReductionMethod::FlatText);
    assert_eq!(
        reduce(&nested("<em>", "</em>", MAX_ACTIVE_FORMATTING + 1)).method,
        ReductionMethod::FlatText
    );
}

#[test]
fn truncated_and_broken_html_does_not_panic() {
    let html =
        std::fs::read_to_string(pages_dir().join("news_blog_layout.html")).unwrap_or_default();
    let mut cut = 0;
    while cut < html.len() {
        let page = prefix_at_char_boundary(&html, cut);
        let _ = reduce(page);
        cut += 97;
    }
    let mid_article = &html[..html.find("Construction is expected").unwrap_or(html.len())];
    let reduction = reduce(mid_article);
    assert!(
        reduction
            .markdown
            .contains("ending a debate that has run for almost three years.")
    );
    for broken in [
        "<html><body><p>unclosed <b>bold <i>italic <a href='x'>link",
        "<table><tr><td>cell<tr><td>row</table></td></table></div></p>",
        "<div <p =\"\"'>>>><</</><!-- never closed",
        "<script>var a = '</scr' + 'ipt>';",
        "<pre>",
        "<a href=",
        "<td colspan=99999999 rowspan=-5>x</td>",
        "&#xFFFFFFFF; &#0; &#55296; &bogus; &",
    ] {
        let _ = reduce(broken);
        let _ = looks_like_html(broken);
    }
}

#[test]
fn garbage_and_oversized_input_are_bounded() {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let garbage: String = (0..200_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from_u32((state % 0x3000) as u32).unwrap_or('\u{fffd}')
        })
        .collect();
    let _ = reduce(&garbage);
    let _ = looks_like_html(&garbage);
    let tags: String = (0..50_000)
        .map(|i| {
            [
                "<div>",
                "</p>",
                "<td colspan=1000>",
                "<table>",
                "<li>",
                "</b>",
            ][i % 6]
        })
        .collect();
    let _ = reduce(&tags);

    let huge = "<p>x</p>".repeat(MAX_PAGE_BYTES / 8 + 1);
    match reduce_page(&huge, &mut |_, _| None) {
        Err(message) => assert!(message.starts_with("page too large")),
        Ok(_) => panic!("oversized page accepted"),
    }
}

#[test]
fn row_spans_cannot_inflate_the_output() {
    let mut html = String::from("<main><table><tr><th>a</th><th>b</th><th>c</th></tr><tr>");
    for _ in 0..2 {
        html.push_str(&format!("<td rowspan=65534>{}</td>", "word ".repeat(8)));
    }
    html.push_str("<td>y</td></tr>");
    html.push_str(&"<tr><td>x</td></tr>".repeat(5_000));
    html.push_str(&"<tr></tr>".repeat(50_000));
    html.push_str("</table></main>");
    let reduction = reduce(&html);
    assert!(
        reduction.markdown.len() < html.len(),
        "{} > {}",
        reduction.markdown.len(),
        html.len()
    );
}

#[test]
fn wide_colspans_are_capped() {
    let html = "<main><table><tr><td colspan=1000>a</td></tr><tr><td>b</td></tr><tr><td>c</td></tr></table></main>";
    let reduction = reduce(html);
    assert!(reduction.tables.is_empty());
    assert!(reduction.markdown.len() < 100);
}

/// The pre-parse scan must not under-estimate what html5ever builds, or the bounds on depth
/// and work would not hold: random tag soup built to hit the parser's odd modes (foreign
/// content, tables, select, frameset, formatting reconstruction).
#[test]
fn the_scan_bounds_what_the_parser_builds() {
    let vocabulary = [
        "<div>",
        "</div>",
        "<p>",
        "</p>",
        "<b>",
        "</b>",
        "<i class=x>",
        "</i>",
        "<a href=#>",
        "</a>",
        "<table>",
        "</table>",
        "<tr>",
        "</tr>",
        "<td>",
        "</td>",
        "<th>",
        "<li>",
        "</li>",
        "<ul>",
        "</ul>",
        "<span>",
        "</span>",
        "x",
        " ",
        "<font>",
        "<u>",
        "</u>",
        "<caption>",
        "<select>",
        "<option>",
        "<svg>",
        "<path/>",
        "</svg>",
        "<div/>",
        "<br>",
        "<h1>",
        "</h1>",
        "<script>",
        "</script>",
        "<style>",
        "<title>",
        "<noscript>",
        "<iframe>",
        "<xmp>",
        "<noframes>",
        "<button>",
        "<form>",
        "</form>",
        "<nobr>",
        "<em>",
        "<dd>",
        "<dt>",
        "<marquee>",
        "<object>",
        "<template>",
        "</template>",
        "<frameset>",
        "<math>",
        "<mi>",
        "<plaintext>",
        "<textarea>",
        "</textarea>",
        "<code id=1>",
        "<code id=2>",
        "<strong>",
        "<s>",
        "<small>",
        "<foreignObject>",
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as usize
    };
    for _ in 0..300 {
        let tokens = 50 + random() % 3_000;
        // Some documents lean on the first third of the vocabulary (nesting, tables).
        let bias = random() % 2 == 0;
        let doc: String = (0..tokens)
            .map(|_| {
                vocabulary[random()
                    % if bias {
                        vocabulary.len() / 3
                    } else {
                        vocabulary.len()
                    }]
            })
            .collect();
        let shape = MarkupShape::scan(&doc, &Interrupt::none());
        if shape.too_costly() {
            continue;
        }
        let document = Document::from(doc.as_str());
        let arena = Arena::build(&document, &Interrupt::none());
        assert!(
            arena.parse_tree_depth <= shape.max_depth + 32,
            "depth {} > scan {}: {doc}",
            arena.parse_tree_depth,
            shape.max_depth
        );
        assert!(
            arena.parse_tree_elements <= 2 * shape.start_tags + 64,
            "elements {} > scan {}: {doc}",
            arena.parse_tree_elements,
            shape.start_tags
        );
    }
}

#[test]
fn reconstructed_formatting_cannot_multiply_the_tree() {
    // 200 unclosed <b>s re-opened inside each of 20,000 divs: 240 KB that html5ever turns
    // into 4 M elements.
    let mut html = String::from("<div>");
    for i in 0..200 {
        html.push_str(&format!("<b id={i}>"));
    }
    html.push_str("</div>");
    html.push_str(&"<div>x</div>".repeat(20_000));
    // Flat text: the scan's element count refused the tree (benches/bounds.rs times it).
    let reduction = reduce(&html);
    assert_eq!(reduction.method, ReductionMethod::FlatText);
}

/// `cargo test --release -- --ignored --nocapture speed`
#[test]
#[ignore]
fn speed_of_a_one_megabyte_page() {
    let base =
        std::fs::read_to_string(pages_dir().join("py_library_datetime.html")).unwrap_or_default();
    let start = base.find("<div class=\"body\" role=\"main\">").unwrap_or(0);
    let end = base[start..]
        .find("<div class=\"sphinxsidebar\"")
        .map_or(base.len(), |e| start + e);
    // Copies of the article go inside the same <main>, so the whole megabyte is content.
    let opening = "<div class=\"body\" role=\"main\">";
    let inner_end = base[start..end]
        .find("<div class=\"clearer\">")
        .map_or(end, |e| start + e);
    let inner = base[start + opening.len()..inner_end].to_string();
    let mut page = base.clone();
    while page.len() < 1_000_000 {
        page.insert_str(inner_end, &inner);
    }
    let runs = 20;
    let mut times = Vec::new();
    let mut reduction = None;
    for _ in 0..runs {
        let started = Instant::now();
        reduction = Some(reduce(&page));
        times.push(started.elapsed());
    }
    times.sort();
    let reduction = reduction.unwrap_or_else(|| reduce(&page));
    println!(
        "{} bytes: median {:?}, min {:?}; method {:?}, markdown {} chars",
        page.len(),
        times[runs / 2],
        times[0],
        reduction.method,
        reduction.markdown.len()
    );
}

/// `n` distinct attributes, as html5ever sees them (`a0=v a1=v …`).
fn attributes(n: usize) -> String {
    (0..n).map(|i| format!(" a{i}=v")).collect()
}

fn shape_of(html: &str) -> MarkupShape {
    MarkupShape::scan(html, &Interrupt::none())
}

/// Issue 35: html5ever checks every attribute against the earlier ones of its tag, so the parse
/// was quadratic in attributes (one tag of 200,000: minutes). The scan bounds that work before
/// the parser runs, however the attributes are spread; past the bound the page is its text.
#[test]
fn attribute_heavy_pages_are_bounded_before_the_parser_runs() {
    let text = "<p>The article text stays.</p>";
    for (what, page) in [
        (
            "one tag of 20,000",
            format!(
                "<html><body><div{}>x</div>{text}</body></html>",
                attributes(20_000)
            ),
        ),
        (
            "100 tags of 1,000",
            format!(
                "<html><body>{}{text}</body></html>",
                format!("<span{}>y</span>", attributes(1_000)).repeat(100)
            ),
        ),
        (
            // The parser reads `<p a="` as textarea text and the <h> as a tag; a scan that took
            // the <p> for a tag saw the <h>'s attributes inside a quoted value.
            "hidden behind a textarea",
            format!(
                "<html><body><textarea><p a=\"</textarea><h{}>\">{text}</body></html>",
                attributes(10_000)
            ),
        ),
        (
            // Each <body> merges its attributes into the body element, against all it holds.
            "repeated body tags",
            format!(
                "<html><body>{text}{}</body></html>",
                (0..5_000)
                    .map(|i| format!("<body b{i}=v c{i}=v>"))
                    .collect::<String>()
            ),
        ),
    ] {
        let shape = shape_of(&page);
        assert!(
            shape.attribute_work > MAX_ATTRIBUTE_WORK,
            "{what}: {}",
            shape.attribute_work
        );
        let reduction = reduce(&page);
        assert_eq!(reduction.method, ReductionMethod::FlatText, "{what}");
        assert!(
            reduction.markdown.contains("The article text stays."),
            "{what}: {}",
            reduction.markdown
        );
    }
    // Many attributes per tag, but within the bound (100 × 1,000 × 999 / 2 ≈ 5 M): parsed.
    let busy = format!(
        "<html><body><main>{}</main></body></html>",
        format!("<p{}>para</p>", attributes(100)).repeat(1_000)
    );
    assert!(shape_of(&busy).attribute_work < MAX_ATTRIBUTE_WORK);
    assert_eq!(reduce(&busy).method, ReductionMethod::Landmark);
}

/// A formatting element left open is copied, with all its attributes, into every paragraph
/// after it: 0.66 MB made 150 M attributes and minutes of parsing.
#[test]
fn reopened_formatting_elements_are_bounded_by_what_they_copy() {
    let page = format!(
        "<html><body><div><b{}></div>{}</body></html>",
        attributes(3_000),
        "<p>x</p>".repeat(1_000)
    );
    let shape = shape_of(&page);
    // The scan stops as soon as the copies pass the bound (after 334 paragraphs).
    assert!(shape.cloned_attributes > MAX_CLONED_ATTRIBUTES);
    assert!(shape.too_costly());
    assert_eq!(reduce(&page).method, ReductionMethod::FlatText);
    // A sloppy page's unclosed <font face=… size=…> is copied too, and costs little.
    let sloppy = format!(
        "<html><body><font face=Arial size=2>{}</body></html>",
        "<p>x</p>".repeat(1_000)
    );
    let shape = shape_of(&sloppy);
    assert!(shape.cloned_attributes <= 2 * 1_000 && !shape.too_costly());
}

/// The scan reads comments, raw text and script escapes where html5ever does: a scan that ended
/// them elsewhere took the markup after for text or a quoted value, and missed its depth (a
/// 250 KB page of 50,000 `<div>`s after `<textarea><p a="`: minutes of parsing).
#[test]
fn markup_cannot_hide_from_the_scan_in_text_the_scan_misreads() {
    let deep = "<div>".repeat(5_000);
    for (what, page) in [
        (
            "a textarea holding a quote",
            format!("<textarea><p a=\"</textarea>{deep}\">"),
        ),
        (
            "a title holding a quote",
            format!("<title><p a='</title>{deep}'>"),
        ),
        // `<!-->` is a whole comment: a scan looking for `-->` after it hid what followed.
        ("an abrupt comment", format!("<!-->{deep}<!-- -->")),
        (
            "a script's double escape",
            format!("<script><!--<script></script><p a=\"</script>{deep}\">"),
        ),
        (
            // `</titlex>` does not end a title: the rest is still its text for the parser, but
            // a frameset would make it markup, so it is charged.
            "markup inside raw text",
            format!("<title>{deep}"),
        ),
        ("a bogus end tag", format!("</ <p a=\">{deep}\">")),
    ] {
        let shape = shape_of(&page);
        assert!(shape.max_depth > MAX_NESTING_DEPTH, "{what}: {shape:?}");
        assert!(
            matches!(reduce(&page).method, ReductionMethod::FlatText),
            "{what}"
        );
    }
    // What the parser does read as text stays text: no depth from a script's strings.
    let script = format!("<html><body><script>var s = \"{deep}\";</script><p>x</p></body></html>");
    assert!(shape_of(&script).max_depth < 10);
}

#[test]
fn tags_comments_and_raw_text_end_where_the_parser_ends_them() {
    let b = |s: &str| s.as_bytes().to_vec();
    // Comments (the text after `<!--`).
    assert_eq!(comment_end(&b(">rest"), 0), 1);
    assert_eq!(comment_end(&b("->rest"), 0), 2);
    assert_eq!(comment_end(&b(" x --!> y --> z"), 0), 7);
    assert_eq!(comment_end(&b(" x --> y --!> z"), 0), 6);
    assert_eq!(comment_end(&b(" never closed"), 0), 13);
    // Raw text ends at its whole name, in any case, followed by a delimiter.
    let title = b("a </titles> b </TITLE\n>");
    assert_eq!(find_end_tag(&title, 0, "title"), Some(14));
    // Scripts: an escaped `<script>` makes the next `</script>` part of the text.
    let script = b("a <!-- <script> x </script> y --> z </script>");
    assert_eq!(find_script_end(&script, 0), Some(36));
    // An escape alone does not keep `</script>` from ending the script; an escaped `<script>`
    // never closed does.
    let escaped = b("if (a <b) { s = '<!--' } </script>");
    assert_eq!(find_script_end(&escaped, 0), Some(25));
    assert_eq!(
        find_script_end(&b("<!-- <script x </script-x> </scripts>"), 0),
        None
    );
    assert_eq!(find_script_end(&b("x <!-- y --> </script>"), 0), Some(13));
    // Tags: `>` in a quoted value does not end one, `/` ending an unquoted value is its text.
    let tag = read_tag(&b(r#"<a href="x>y" b=c/>rest"#), 1);
    assert_eq!((tag.name_end, tag.end, tag.attributes), (2, 19, 2));
    assert!(!tag.self_closing);
    let tag = read_tag(&b("<br/>"), 1);
    assert_eq!((tag.name_end, tag.end, tag.self_closing), (3, 5, true));
    // The tokenizer's tag name runs to whitespace, `/` or `>`: `<script.x>` is no script.
    let mut tokens = Tokens::new("<script.x a=1><b>");
    assert!(
        matches!(
            tokens.next(),
            Some(Token::Tag {
                name: "script.x",
                attributes: 1,
                ..
            })
        ),
        "the whole name"
    );
}

/// Past the deadline the page is its text (the parser-less path is linear and always finishes);
/// on cancel the stage ends with an error. Work is counted, not timed.
#[test]
fn a_passed_deadline_gives_the_text_and_a_cancel_stops() {
    let html =
        std::fs::read_to_string(pages_dir().join("news_blog_layout.html")).unwrap_or_default();
    let passed = Interrupt::at(Instant::now());
    let reduction = match reduce_page_with(&html, &mut |_, _| None, &passed) {
        Ok(reduction) => reduction,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(reduction.method, ReductionMethod::OutOfTime);
    assert!(reduction.tables.is_empty());
    assert!(
        reduction
            .markdown
            .contains("ending a debate that has run for almost three years.")
    );

    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let cancelled = Interrupt::none().with_cancel(flag.clone());
    assert_eq!(
        reduce_page_with(&html, &mut |_, _| None, &cancelled).map(|r| r.method),
        Err(CANCELLED.to_string())
    );

    // Cancelled while rendering (a table's note is written mid-walk): the walk stops within a
    // stride of nodes and nothing it rendered is used.
    flag.store(false, std::sync::atomic::Ordering::Relaxed);
    let rows: String = (0..3_000)
        .map(|i| format!("<tr><td>{i}</td><td>v{i}</td></tr>"))
        .collect();
    let page = format!(
        "<html><body><main><table><tr><th>n</th><th>v</th></tr>{rows}</table>{}</main></body></html>",
        "<p>after the table</p>".repeat(3_000)
    );
    let mut notes = 0;
    let result = reduce_page_with(
        &page,
        &mut |_, _| {
            notes += 1;
            flag.store(true, std::sync::atomic::Ordering::Relaxed);
            None
        },
        &cancelled,
    );
    assert_eq!(notes, 1);
    assert_eq!(result.map(|r| r.method), Err(CANCELLED.to_string()));
}

#[test]
fn the_arena_walks_stop_within_a_stride() {
    let page = format!("<html><body>{}</body></html>", "<p>x</p>".repeat(20_000));
    let document = Document::from(page.as_str());
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let arena = Arena::build(&document, &Interrupt::none().with_cancel(flag.clone()));
    assert_eq!(arena.stopped(), None);
    flag.store(true, std::sync::atomic::Ordering::Relaxed);
    struct Count(usize);
    impl Visitor for Count {
        fn enter(&mut self, _: &Arena, _: u32) -> bool {
            self.0 += 1;
            true
        }
        fn exit(&mut self, _: &Arena, _: u32) {}
    }
    let mut count = Count(0);
    arena.walk(arena.body(), false, &mut count);
    assert_eq!(arena.stopped(), Some(Stop::Cancelled));
    assert!(count.0 < STRIDE as usize, "{} nodes entered", count.0);
    // From then on every walk returns at once.
    let mut again = Count(0);
    arena.walk(arena.body(), false, &mut again);
    assert_eq!(again.0, 0);
}
