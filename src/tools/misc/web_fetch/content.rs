//! What `web_fetch` does with a response body: decide whether it is HTML, other text or
//! binary, and turn HTML into readable markdown.
//!
//! HTML becomes markdown with `htmd` (scripts, styles and other non-content elements dropped);
//! text types are returned as they are; binary content is refused. Bodies are decoded as
//! UTF-8 (invalid sequences replaced): the client is built without character-set conversion,
//! and nearly all of the web is UTF-8. This module does no I/O.

/// How a body is turned into text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentKind {
    Html,
    Text,
    Binary,
}

/// The media type without parameters, lowercased (`text/html; charset=utf-8` → `text/html`).
pub fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// The kind a declared media type promises, or `None` when the type says nothing useful
/// (missing, `application/octet-stream`) and the body must be sniffed.
pub fn kind_from_media_type(essence: &str) -> Option<ContentKind> {
    const TEXT_APPLICATION_TYPES: &[&str] = &[
        "application/json",
        "application/ld+json",
        "application/xml",
        "application/javascript",
        "application/ecmascript",
        "application/x-javascript",
        "application/x-sh",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/x-toml",
        "application/sql",
        "application/graphql",
        "application/x-ndjson",
        "application/rss+xml",
        "application/atom+xml",
        "image/svg+xml",
    ];
    match essence {
        "" | "application/octet-stream" | "binary/octet-stream" => None,
        "text/html" | "application/xhtml+xml" => Some(ContentKind::Html),
        text if text.starts_with("text/") => Some(ContentKind::Text),
        text if TEXT_APPLICATION_TYPES.contains(&text)
            || text.ends_with("+json")
            || text.ends_with("+xml") =>
        {
            Some(ContentKind::Text)
        }
        _ => Some(ContentKind::Binary),
    }
}

/// The kind of an undeclared body, judged by its first bytes: valid UTF-8 (allowing a
/// character cut at the end) without NUL bytes is text, and HTML when it starts like HTML.
pub fn sniff(body: &[u8]) -> ContentKind {
    let head = &body[..body.len().min(8_192)];
    // `error_len() == None`: the only problem is a character cut by the 8 KiB window.
    let is_utf8 = match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(err) => err.error_len().is_none(),
    };
    if !is_utf8 || head.contains(&0) {
        return ContentKind::Binary;
    }
    let start = String::from_utf8_lossy(&head[..head.len().min(512)])
        .trim_start()
        .to_ascii_lowercase();
    if start.starts_with("<!doctype html") || start.starts_with("<html") {
        ContentKind::Html
    } else {
        ContentKind::Text
    }
}

/// HTML as markdown. CPU-bound: call it off the async threads.
pub fn html_to_markdown(html: &str) -> Result<String, String> {
    // Built per call: the converter holds `Rc`s and so cannot be shared across threads.
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(vec![
            "script", "style", "noscript", "template", "svg", "iframe", "head", "form",
        ])
        .build();
    let markdown = converter
        .convert(html)
        .map_err(|err| format!("cannot convert the HTML to markdown: {err}"))?;
    Ok(collapse_blank_lines(&markdown))
}

/// At most one blank line in a row (converted layouts leave runs of them).
fn collapse_blank_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0;
    for line in text.lines() {
        if line.trim().is_empty() {
            blank_run += 1;
            if blank_run > 1 {
                continue;
            }
        } else {
            blank_run = 0;
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_are_classified() {
        let cases: &[(&str, Option<ContentKind>)] = &[
            ("text/html; charset=utf-8", Some(ContentKind::Html)),
            ("Application/XHTML+XML", Some(ContentKind::Html)),
            ("text/plain", Some(ContentKind::Text)),
            ("text/csv", Some(ContentKind::Text)),
            ("application/json", Some(ContentKind::Text)),
            ("application/problem+json", Some(ContentKind::Text)),
            ("application/rss+xml", Some(ContentKind::Text)),
            ("image/png", Some(ContentKind::Binary)),
            ("application/pdf", Some(ContentKind::Binary)),
            ("application/zip", Some(ContentKind::Binary)),
            ("", None),
            ("application/octet-stream", None),
        ];
        for (declared, expected) in cases {
            assert_eq!(
                kind_from_media_type(&essence(declared)),
                *expected,
                "{declared}"
            );
        }
    }

    #[test]
    fn undeclared_bodies_are_sniffed() {
        assert_eq!(sniff(b"  <!DOCTYPE html><p>x</p>"), ContentKind::Html);
        assert_eq!(sniff(b"<html><body>x"), ContentKind::Html);
        assert_eq!(sniff("plain text, ünïcode".as_bytes()), ContentKind::Text);
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n\0\0\0"), ContentKind::Binary);
        assert_eq!(
            sniff(&[0xff, 0xfe, 0xfd, 0xfc, 0x80, 0x81]),
            ContentKind::Binary
        );
        // A character cut at the end of the body is still text.
        let cut = &"é".as_bytes()[..1];
        assert_eq!(sniff(&[b"abc".as_slice(), cut].concat()), ContentKind::Text);
    }

    #[test]
    fn html_becomes_markdown_without_scripts() {
        let markdown = html_to_markdown(
            "<html><head><title>T</title><style>p{}</style></head><body>\
             <h1>Title</h1><script>alert(1)</script><p>Some <a href=\"/x\">link</a>.</p>\
             <ul><li>one</li><li>two</li></ul></body></html>",
        )
        .unwrap();
        assert!(markdown.starts_with("# Title"), "{markdown}");
        assert!(markdown.contains("[link](/x)"), "{markdown}");
        assert!(
            markdown.contains("one") && markdown.contains("two"),
            "{markdown}"
        );
        assert!(!markdown.contains("alert"), "{markdown}");
        assert!(!markdown.contains("p{}"), "{markdown}");
    }
}
