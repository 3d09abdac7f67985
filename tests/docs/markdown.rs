//! Just enough of Markdown, read line by line, for the book's checks: fenced code blocks,
//! headings and the anchors mdBook gives them, and inline links.

use std::collections::BTreeSet;

/// A fenced code block: its info string (`yaml`, `yaml,norun`, ...), its text, the 1-based line
/// of its opening fence, and the line just above that fence (for a `norun` reason).
#[derive(Debug)]
pub struct Block {
    /// The words after the opening fence, commas and spaces both separating them.
    pub info: Vec<String>,
    /// The lines between the fences, each ending in a newline.
    pub text: String,
    /// The line of the opening fence, counted from 1.
    pub line: usize,
    /// The last non-blank line before the opening fence, trimmed.
    pub above: String,
}

impl Block {
    /// Whether the info string's first word (the language) is `language`.
    pub fn is(&self, language: &str) -> bool {
        self.info.first().is_some_and(|l| l == language)
    }

    /// Whether the info string carries `word` after the language.
    pub fn has(&self, word: &str) -> bool {
        self.info.iter().skip(1).any(|w| w == word)
    }
}

/// Every line of `text`, each with whether it lies inside a fenced code block (fences count as
/// inside), indented fences (in list items) included.
fn lines_with_fences(text: &str) -> Vec<(&str, bool)> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let fence = line.trim_start().starts_with("```");
        if fence {
            out.push((line, true));
            inside = !inside;
        } else {
            out.push((line, inside));
        }
    }
    out
}

/// The fenced code blocks of `text`, in order.
pub fn blocks(text: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut open: Option<(Block, usize)> = None;
    let mut above = String::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match open.take() {
            None if trimmed.starts_with("```") => {
                let info = trimmed.trim_start_matches('`');
                let info = info
                    .split([',', ' ', '\t'])
                    .filter(|w| !w.is_empty())
                    .map(str::to_owned)
                    .collect();
                let indent = line.len() - trimmed.len();
                let block =
                    Block { info, text: String::new(), line: index + 1, above: above.clone() };
                open = Some((block, indent));
            }
            None => {
                if !trimmed.is_empty() {
                    above = trimmed.to_owned();
                }
            }
            Some((block, _)) if trimmed.starts_with("```") => {
                found.push(block);
                above.clear();
            }
            Some((mut block, indent)) => {
                // A fence indented in a list item indents its lines as much.
                let cut = line.len() - line.trim_start().len();
                block.text.push_str(&line[cut.min(indent)..]);
                block.text.push('\n');
                open = Some((block, indent));
            }
        }
    }
    found
}

/// The headings of `text` (ATX `#` headings outside code blocks), as written after the `#`s.
pub fn headings(text: &str) -> Vec<String> {
    lines_with_fences(text)
        .into_iter()
        .filter(|(_, fenced)| !fenced)
        .filter_map(|(line, _)| {
            let rest = line.trim_start_matches('#');
            let level = line.len() - rest.len();
            ((1..=6).contains(&level) && rest.starts_with(' ')).then(|| rest.trim().to_owned())
        })
        .collect()
}

/// What a heading shows once rendered: code spans, emphasis and link targets dropped.
fn rendered(heading: &str) -> String {
    let mut out = String::new();
    let mut chars = heading.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '`' => {}
            '*' => {}
            // `[text](target)` shows only the text.
            ']' if chars.peek() == Some(&'(') => {
                for c in chars.by_ref() {
                    if c == ')' {
                        break;
                    }
                }
            }
            '[' | ']' => {}
            c => out.push(c),
        }
    }
    out
}

/// The id mdBook gives a heading: its rendered text trimmed and lowercased, whitespace to `-`,
/// letters, digits, `_` and `-` kept and everything else dropped.
pub fn anchor(heading: &str) -> String {
    rendered(heading)
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

/// Every anchor of a page: each heading's id, a repeated one with `-1`, `-2`, ... as mdBook
/// makes them unique.
pub fn anchors(text: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for heading in headings(text) {
        let id = anchor(&heading);
        if used.insert(id.clone()) {
            continue;
        }
        let mut n = 1;
        while !used.insert(format!("{id}-{n}")) {
            n += 1;
        }
    }
    used
}

/// `line` without its code spans (`` `...` ``), which may hold text that looks like a link.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for c in line.chars() {
        if c == '`' {
            inside = !inside;
        } else if !inside {
            out.push(c);
        }
    }
    out
}

/// The targets of the inline links of `text` (`[label](target)`, images too), outside code
/// blocks and code spans, each with its 1-based line.
pub fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (index, (line, fenced)) in lines_with_fences(text).into_iter().enumerate() {
        if fenced {
            continue;
        }
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find([')', ' ']).unwrap_or(rest.len());
            found.push((index + 1, rest[..end].to_owned()));
            rest = &rest[end..];
        }
    }
    found
}

#[test]
fn anchors_follow_mdbook() {
    assert_eq!(
        anchor("Quotas and other `additionalConfig` (hostPath)"),
        "quotas-and-other-additionalconfig-hostpath"
    );
    assert_eq!(
        anchor("Who changes a bucket's bucket-wide settings (hostPath)"),
        "who-changes-a-buckets-bucket-wide-settings-hostpath"
    );
    assert_eq!(anchor("The node (`make e2e`)"), "the-node-make-e2e");
    let page = "# A\n\n```sh\n# not a heading\n```\n## A\n## B\n";
    let expected: BTreeSet<String> = ["a", "a-1", "b"].map(String::from).into();
    assert_eq!(anchors(page), expected);
}

#[test]
fn links_and_blocks_are_found_where_they_are() {
    let page = "See [a](x.md#y) and `[no](z)`.\n\n<!-- why -->\n  ```yaml,norun\n  a: 1\n  ```\n";
    assert_eq!(links(page), [(1, "x.md#y".to_owned())]);
    let found = blocks(page);
    assert_eq!(found.len(), 1);
    assert!(found[0].is("yaml") && found[0].has("norun"));
    assert_eq!(found[0].text, "a: 1\n");
    assert_eq!(found[0].above, "<!-- why -->");
    assert_eq!(found[0].line, 4);
}
