use super::*;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use proptest::prelude::*;

/// Deterministic bytes that look like compressed data (xorshift).
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn with_magic(magic: &[u8], n: usize) -> Vec<u8> {
    let mut v = magic.to_vec();
    v.extend(noise(n as u64, n));
    v
}

fn wrap(s: &str, width: usize, nl: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    chars
        .chunks(width)
        .map(|c| c.iter().collect::<String>())
        .collect::<Vec<_>>()
        .join(nl)
}

/// Runs `lift_binary` keeping every blob; returns the output and the blobs.
fn lift(text: &str, min_run: usize) -> (Option<String>, Vec<FoundBlob>) {
    let mut blobs = Vec::new();
    let out = lift_binary(text, min_run, &mut |b| {
        blobs.push(b);
        Some(format!("blob_{}", blobs.len()))
    });
    (out, blobs)
}

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n";

#[test]
fn png_data_uri_in_html_attribute_keeps_the_tag_intact() {
    let png = with_magic(PNG, 3000);
    let text = format!(
        "<p>Chart:</p><img alt=\"c\" src=\"data:image/png;base64,{}\" width=\"10\">",
        STANDARD.encode(&png)
    );
    let (out, blobs) = lift(&text, DEFAULT_MIN_RUN);
    assert_eq!(
        out.as_deref(),
        Some(
            "<p>Chart:</p><img alt=\"c\" src=\"loom:blob_1;type=image/png;bytes=3008\" width=\"10\">"
        )
    );
    assert_eq!(blobs.len(), 1);
    assert_eq!(blobs[0].mime, "image/png");
    assert!(blobs[0].data_uri);
    assert_eq!(blobs[0].bytes, png);
}

#[test]
fn markdown_image_and_json_string_keep_their_syntax() {
    let png = with_magic(PNG, 500);
    let b64 = STANDARD.encode(&png);
    let md = format!("See ![plot](data:image/png;base64,{b64}) above.");
    let (out, _) = lift(&md, DEFAULT_MIN_RUN);
    assert_eq!(
        out.as_deref(),
        Some("See ![plot](loom:blob_1;type=image/png;bytes=508) above.")
    );
    let json = format!("{{\"thumb\":\"data:image/png;base64,{b64}\",\"n\":1}}");
    let (out, _) = lift(&json, DEFAULT_MIN_RUN);
    assert_eq!(
        out.as_deref(),
        Some("{\"thumb\":\"loom:blob_1;type=image/png;bytes=508\",\"n\":1}")
    );
}

#[test]
fn free_standing_data_uri_gets_the_readable_placeholder() {
    let gif = with_magic(b"GIF89a", 200);
    let text = format!(
        "icon: data:image/gif;charset=x;base64,{}\nnext",
        STANDARD.encode(&gif)
    );
    let (out, blobs) = lift(&text, DEFAULT_MIN_RUN);
    assert_eq!(
        out.as_deref(),
        Some("icon: [loom: image/gif, 206 bytes of base64 lifted out → loom_read(blob_1)]\nnext")
    );
    assert_eq!(blobs[0].mime, "image/gif");
}

#[test]
fn tiny_data_uri_is_left_alone() {
    let text = "<img src=\"data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7\">";
    assert!(lift(text, DEFAULT_MIN_RUN).0.is_none());
}

#[test]
fn jpeg_bare_base64_wrapped_at_76() {
    let jpeg = with_magic(b"\xff\xd8\xff\xe0\x00\x10JFIF", 4000);
    let body = wrap(&STANDARD.encode(&jpeg), 76, "\r\n");
    let text = format!(
        "Content-Type: image/jpeg\r\nContent-Transfer-Encoding: base64\r\n\r\n{body}\r\n\r\n--b1--\r\n"
    );
    let (out, blobs) = lift(&text, DEFAULT_MIN_RUN);
    assert_eq!(
        out.as_deref(),
        Some(
            "Content-Type: image/jpeg\r\nContent-Transfer-Encoding: base64\r\n\r\n\
             [loom: image/jpeg, 4,010 bytes of base64 lifted out → loom_read(blob_1)]\r\n\r\n--b1--\r\n"
        )
    );
    assert_eq!(blobs[0].bytes, jpeg);
    assert!(!blobs[0].data_uri);
}

#[test]
fn wrapped_body_followed_directly_by_a_boundary_line() {
    // 3420 bytes encode to exactly 60 full lines of 76: the next line joins the group and must be
    // dropped again on the retry.
    let zip = with_magic(b"PK\x03\x04", 3416);
    let body = wrap(&STANDARD.encode(&zip), 76, "\n");
    let text = format!("{body}\n--boundary_42\nafter");
    let (out, blobs) = lift(&text, DEFAULT_MIN_RUN);
    assert_eq!(
        out.as_deref(),
        Some(
            "[loom: application/zip, 3,420 bytes of base64 lifted out → loom_read(blob_1)]\n--boundary_42\nafter"
        )
    );
    assert_eq!(blobs[0].bytes, zip);
}

#[test]
fn pem_certificate_body_is_lifted_and_armor_kept() {
    let pem = include_str!("cert.pem");
    let text = format!("Server certificate:\n{pem}Verify return code: 0 (ok)\n");
    let (out, blobs) = lift(&text, DEFAULT_MIN_RUN);
    let out = out.expect("a certificate body is over 1 KiB");
    assert!(out.starts_with("Server certificate:\n-----BEGIN CERTIFICATE-----\n[loom: "));
    assert!(out.ends_with("]\n-----END CERTIFICATE-----\nVerify return code: 0 (ok)\n"));
    assert_eq!(blobs.len(), 1);
    assert_eq!(blobs[0].mime, "application/octet-stream");
    assert_eq!(blobs[0].bytes.first(), Some(&0x30)); // DER SEQUENCE
    // Indented (YAML block scalar) and JSON-escaped forms too.
    let yaml = format!("tls.crt: |\n  {}", pem.replace('\n', "\n  "));
    assert_eq!(lift(&yaml, DEFAULT_MIN_RUN).1.len(), 1);
    let json = format!("{{\"cert\":\"{}\"}}", pem.replace('\n', "\\n"));
    let (out, blobs) = lift(&json, DEFAULT_MIN_RUN);
    assert_eq!(blobs.len(), 1);
    assert!(
        out.unwrap_or_default()
            .ends_with(")]\\n-----END CERTIFICATE-----\\n\"}")
    );
}

#[test]
fn hex_sha256_lists_stay() {
    let hashes: Vec<String> = (0..40)
        .map(|i| {
            noise(i, 32)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        })
        .collect();
    for sep in ["\n", " ", ", ", "\r\n"] {
        let text = hashes.join(sep);
        assert!(lift(&text, DEFAULT_MIN_RUN).0.is_none(), "sep {sep:?}");
        assert!(lift(&text, 64).0.is_none(), "sep {sep:?}");
    }
    // One long hex blob is hex too.
    assert!(lift(&hashes.concat(), 64).0.is_none());
    assert!(lift(&hashes.concat().to_uppercase(), 64).0.is_none());
}

#[test]
fn base64_sha256_lists_stay() {
    for pad in [true, false] {
        let hashes: Vec<String> = (0..60)
            .map(|i| {
                let h = STANDARD.encode(noise(i + 100, 32));
                if pad {
                    h
                } else {
                    h.trim_end_matches('=').to_string()
                }
            })
            .collect();
        for sep in ["\n", " ", ",", "\n  "] {
            let text = hashes.join(sep);
            assert!(
                lift(&text, DEFAULT_MIN_RUN).0.is_none(),
                "pad {pad} sep {sep:?}"
            );
        }
    }
    // SRI hashes, one per line: `sha384-` mixes the URL-safe `-` with standard base64.
    let sri: Vec<String> = (0..30)
        .map(|i| format!("sha384-{}", STANDARD.encode(noise(i, 48))))
        .collect();
    assert!(lift(&sri.join("\n"), 128).0.is_none());
}

const MINIFIED_JS: &str = r#"!function(e,t){"object"==typeof exports&&"undefined"!=typeof module?module.exports=t():"function"==typeof define&&define.amd?define(t):(e=e||self).Loom=t()}(this,function(){"use strict";var e="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",t=function(t){for(var n="",r=0;r<t.length;r+=3){var o=t[r]<<16|t[r+1]<<8|t[r+2];n+=e[o>>18&63]+e[o>>12&63]+e[o>>6&63]+e[63&o]}return n};function n(e,t){if(!(e instanceof t))throw new TypeError("Cannot call a class as a function")}var r=function(){function e(t){n(this,e),this.items=t||[],this.createdAtTimestampMilliseconds=Date.now()}return e.prototype.getItemsWithVeryLongDescriptiveNameForTesting=function(){return this.items.filter(function(e){return null!=e&&e.enabled})},e}();return{encode:t,Store:r}});"#;

#[test]
fn minified_js_and_css_stay() {
    let js = MINIFIED_JS.repeat(40);
    assert!(lift(&js, DEFAULT_MIN_RUN).0.is_none());
    assert!(lift(&js, 64).0.is_none());
    let css = ".a{color:#fff;background:url(/img/sprite.png) no-repeat 0 -120px}.btn-primary:hover{border-color:#2e6da4}@media (max-width:768px){.navbar-collapse{max-height:340px}}".repeat(50);
    assert!(lift(&css, 64).0.is_none());
    // …but a source map inlined as a data URI is lifted.
    let map = STANDARD
        .encode(r#"{"version":3,"sources":["a.js"],"names":[],"mappings":"AAAA,SAAS"}"#.repeat(20));
    let with_map = format!("{js}\n//# sourceMappingURL=data:application/json;base64,{map}\n");
    let (out, blobs) = lift(&with_map, DEFAULT_MIN_RUN);
    assert_eq!(blobs.len(), 1);
    assert_eq!(blobs[0].mime, "application/json");
    assert!(
        out.unwrap_or_default()
            .ends_with("//# sourceMappingURL=loom:blob_1;type=application/json;bytes=1320\n")
    );
}

#[test]
fn long_identifiers_paths_and_prose_stay() {
    let words = [
        "Context",
        "Firewall",
        "Gateway",
        "Document",
        "Reader",
        "Budget",
        "Cut",
        "Lift",
        "Binary",
        "Placeholder",
    ];
    let camel: String = (0..200).map(|i| words[(i * 7) % 10]).collect();
    let camel_digits: String = (0..200)
        .map(|i| format!("{}{}", words[(i * 3) % 10], i % 97))
        .collect();
    let path: String = (0..200)
        .map(|i| format!("/{}", words[(i * 7) % 10].to_lowercase()))
        .collect();
    let markdown = "## Results\n\nThe **gateway** forwards each `tools/call` to the [server](https://example.com/docs) and keeps the result.\n\n- one\n- two\n".repeat(40);
    let base32 =
        "MFRGGZDFMZTWQ2LKNNWG23TPOBYXE43UOV3HO6DZPJBEGRCFIZDUQSKKJNGE2TSPKBIVEU2UKVLFOWCZLJ"
            .repeat(20);
    for t in [&camel, &camel_digits, &path, &markdown, &base32] {
        assert!(lift(t, 64).0.is_none(), "{}", &t[..60]);
    }
}

#[test]
fn long_url_with_base64_query_stays() {
    let state = URL_SAFE_NO_PAD.encode(noise(7, 2000));
    let sig = STANDARD.encode(noise(8, 1500));
    let text = format!(
        "Redirecting to https://auth.example.com/callback?state={state}&sig={sig}&x=1 now\n\
         <a href=\"https://cdn.example.com/v1/{sig}\">link</a>"
    );
    assert!(lift(&text, DEFAULT_MIN_RUN).0.is_none());
    // The same run outside a URL is payload.
    let (_, blobs) = lift(&format!("state {state} end"), DEFAULT_MIN_RUN);
    assert_eq!(blobs.len(), 1);
}

#[test]
fn jwt_stays_unless_a_part_is_huge() {
    let head = URL_SAFE_NO_PAD.encode(r#"{"alg":"RS256","typ":"JWT","kid":"k1"}"#);
    let claims = URL_SAFE_NO_PAD.encode(
        r#"{"sub":"1234567890","name":"Loom Test","iat":1516239022,"scope":"read write admin","aud":["a","b","c"]}"#,
    );
    let sig = URL_SAFE_NO_PAD.encode(noise(3, 256));
    let jwt = format!("{head}.{claims}.{sig}");
    let text = format!("Authorization: Bearer {jwt}\n{{\"id_token\":\"{jwt}\"}}");
    assert!(lift(&text, 64).0.is_none());
    assert!(lift(&text, DEFAULT_MIN_RUN).0.is_none());
    // A part of 8 × min_run or more is payload, not a credential.
    let big = URL_SAFE_NO_PAD.encode(noise(4, 6200));
    let jws = format!("{head}.{big}.{sig}");
    let (out, blobs) = lift(&jws, DEFAULT_MIN_RUN);
    assert_eq!(blobs.len(), 1);
    assert!(
        out.unwrap_or_default()
            .starts_with(&format!("{head}.[loom: "))
    );
}

#[test]
fn data_prefix_with_invalid_base64_stays() {
    let png = STANDARD.encode(with_magic(PNG, 600));
    let svg = format!(
        "<img src=\"data:image/svg+xml;utf8,%3Csvg xmlns='http://www.w3.org/2000/svg'%3E{}%3C/svg%3E\">",
        "%3Crect width='10' height='10'/%3E".repeat(30)
    );
    let texts = [
        svg,
        format!("data:image/png;base64,{png}A"), // base64 after the padding
        format!("<img src=\"data:image/png;base64,{}\">", &png[..801]), // length ≡ 1 (mod 4)
        format!("data:image/png;base64,{}*{}", &png[..400], &png[400..]), // `*` continues the URI
        format!(
            "https://x.y/?u=data%3Aimage%2Fpng%3Bbase64%2C{}%3D%3D",
            &png[..600]
        ), // percent-encoded
        "metadata: none; data: 12 rows; data:text/plain,hello".to_string(),
        format!("data:image/png;base64,{}-{}", &png[..100], &png[100..]), // both alphabets
    ];
    for t in &texts {
        let (out, blobs) = lift(t, DEFAULT_MIN_RUN);
        assert!(out.is_none() && blobs.is_empty(), "{}", &t[..60]);
    }
}

#[test]
fn invalid_padding_is_not_base64() {
    let raw = noise(11, 1600); // 1600 % 3 == 1: canonical padding is `==`
    let good = STANDARD.encode(&raw);
    assert!(good.ends_with("=="));
    let one_pad = good.trim_end_matches('=').to_string() + "=";
    assert_eq!(lift(&format!("x {good} y"), DEFAULT_MIN_RUN).1.len(), 1);
    assert!(lift(&format!("x {one_pad} y"), DEFAULT_MIN_RUN).0.is_none());
    let uri = format!("<img src=\"data:image/png;base64,{one_pad}\">");
    assert!(lift(&uri, DEFAULT_MIN_RUN).0.is_none());
    // Unpadded is fine: many encoders omit padding.
    let bare = good.trim_end_matches('=');
    assert_eq!(lift(&format!("x {bare} y"), DEFAULT_MIN_RUN).1.len(), 1);
}

#[test]
fn url_safe_base64_is_lifted() {
    let raw = noise(12, 3000);
    let text = format!("{{\"payload\":\"{}\"}}", URL_SAFE_NO_PAD.encode(&raw));
    let (out, blobs) = lift(&text, DEFAULT_MIN_RUN);
    assert_eq!(
        out.as_deref(),
        Some(
            "{\"payload\":\"[loom: application/octet-stream, 3,000 bytes of base64 lifted out → loom_read(blob_1)]\"}"
        )
    );
    assert_eq!(blobs[0].bytes, raw);
}

#[test]
fn json_escaped_wrapping_and_slashes() {
    // GitHub's contents API wraps at 60 with `\n` escapes; PHP escapes `/` as `\/`.
    let readme =
        "# Loom\n\nA context gateway for MCP. It keeps big results out of the model's context.\n"
            .repeat(30);
    let enc = STANDARD.encode(&readme);
    let github = format!(
        "{{\"encoding\":\"base64\",\"content\":\"{}\"}}",
        wrap(&enc, 60, "\\n")
    );
    let (out, blobs) = lift(&github, DEFAULT_MIN_RUN);
    assert_eq!(blobs[0].mime, "text/plain");
    assert_eq!(blobs[0].bytes, readme.as_bytes());
    assert!(
        out.unwrap_or_default()
            .starts_with("{\"encoding\":\"base64\",\"content\":\"[loom: text/plain, 2,520 bytes")
    );
    let jpeg = with_magic(b"\xff\xd8\xff\xdb", 2000);
    let php = format!(
        "{{\"img\":\"{}\"}}",
        STANDARD.encode(&jpeg).replace('/', "\\/")
    );
    let (out, blobs) = lift(&php, DEFAULT_MIN_RUN);
    assert_eq!(blobs[0].bytes, jpeg);
    assert!(out.unwrap_or_default().ends_with(")]\"}"));
}

#[test]
fn zero_heavy_binary_needs_its_magic() {
    let mut wasm = b"\0asm\x01\0\0\0".to_vec();
    wasm.extend(std::iter::repeat_n(0u8, 2000));
    let (_, blobs) = lift(&STANDARD.encode(&wasm), DEFAULT_MIN_RUN);
    assert_eq!(blobs[0].mime, "application/wasm");
    let zeros = STANDARD.encode(vec![0u8; 2000]);
    assert!(lift(&zeros, DEFAULT_MIN_RUN).0.is_none());
}

#[test]
fn declined_blobs_stay_and_later_ones_still_lift() {
    let a = STANDARD.encode(with_magic(PNG, 1200));
    let b = STANDARD.encode(with_magic(b"%PDF-1.7\n", 1200));
    let text = format!("first {a}\nsecond {b}\n");
    let mut seen = Vec::new();
    let out = lift_binary(&text, DEFAULT_MIN_RUN, &mut |blob| {
        seen.push(blob.mime);
        (seen.len() == 2).then(|| "blob_9".to_string())
    });
    assert_eq!(seen, ["image/png", "application/pdf"]);
    assert_eq!(
        out.as_deref(),
        Some(
            format!(
                "first {a}\nsecond [loom: application/pdf, 1,209 bytes of base64 lifted out → loom_read(blob_9)]\n"
            )
            .as_str()
        )
    );
}

#[test]
fn thousands() {
    assert_eq!(crate::common::text::thousands(0), "0");
    assert_eq!(crate::common::text::thousands(999), "999");
    assert_eq!(crate::common::text::thousands(1000), "1,000");
    assert_eq!(crate::common::text::thousands(48213), "48,213");
    assert_eq!(crate::common::text::thousands(1234567), "1,234,567");
}

/// Text made of the pieces that matter here: base64 of data, wrapping, escapes, `data:`
/// headers, hex, and arbitrary Unicode between them.
fn messy_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        any::<String>(),
        "[A-Za-z0-9+/=_\\-\\\\.:\"' \n\r]{0,80}",
        (any::<u64>(), 0usize..1500).prop_map(|(s, n)| STANDARD.encode(noise(s, n))),
        (any::<u64>(), 0usize..1500).prop_map(|(s, n)| URL_SAFE_NO_PAD.encode(noise(s, n))),
        (any::<u64>(), 0usize..1500, 1usize..90).prop_map(|(s, n, w)| wrap(
            &STANDARD.encode(noise(s, n)),
            w,
            "\n"
        )),
        (0usize..800).prop_map(|n| wrap(&STANDARD.encode(with_magic(PNG, n)), 76, "\\n")),
        Just("data:image/png;base64,".to_string()),
        Just("data:;base64,".to_string()),
        Just("https://x.y/?a=".to_string()),
        Just("\\/".to_string()),
        Just("=".to_string()),
        "[0-9a-f]{0,200}",
    ];
    prop::collection::vec(piece, 0..12).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn declining_every_blob_changes_nothing(text in messy_text(), min_run in 0usize..2000) {
        let out = lift_binary(&text, min_run, &mut |_| None);
        prop_assert!(out.is_none());
    }

    #[test]
    fn keeping_never_panics_and_only_shrinks_runs(text in messy_text(), min_run in 0usize..2000) {
        let mut n = 0;
        let out = lift_binary(&text, min_run, &mut |b| {
            n += 1;
            assert!(!b.mime.is_empty());
            Some(format!("blob_{n}"))
        });
        prop_assert_eq!(out.is_some(), n > 0);
        if let Some(out) = out {
            prop_assert!(out.contains("blob_1"));
        }
    }
}
