//! The shell commands of a Markdown document, as a reader sees them: the
//! fenced blocks whose language is `sh`, `bash`, `shell` or `console`, split
//! into commands.
//!
//! The fenced blocks are found by `pulldown-cmark` (a real CommonMark
//! parser: indented fences, `~~~`, info strings with attributes). Splitting a
//! block into commands is written here because no crate gives what the docs
//! test needs: the text of each command as written (to run it with `bash -c`
//! and print it), where it ends (a newline outside quotes and not after a
//! backslash), its trailing `# comment` removed while respecting quotes, and
//! a trailing `&`. Words (program, options) are split by `shlex`.

#![allow(dead_code)]

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

/// The languages whose blocks hold commands.
pub const SHELL_LANGUAGES: &[&str] = &["sh", "bash", "shell", "console"];

/// One fenced block of shell commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The document, as given (e.g. `README.md`).
    pub doc: String,
    /// The line of the opening fence (1-based).
    pub line: usize,
    /// The language of the fence (`sh`, `console`...).
    pub lang: String,
    /// The block's text, without the fences.
    pub text: String,
}

impl Block {
    /// Where the block is, for messages: `README.md:42`.
    pub fn place(&self) -> String {
        format!("{}:{}", self.doc, self.line)
    }
}

/// One command of a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The line it starts on, in the document (1-based).
    pub line: usize,
    /// The command as written: backslash continuations joined into one
    /// line, a trailing comment and a trailing `&` removed; newlines inside
    /// quotes kept.
    pub text: String,
    /// Written with a trailing `&` (a background job).
    pub background: bool,
}

impl Command {
    /// `NAME` and the value's text when the command is only a variable
    /// assignment (`A=127.0.0.1:8080`, `export A=...`).
    pub fn assignment(&self) -> Option<(String, String)> {
        let text = self
            .text
            .strip_prefix("export ")
            .unwrap_or(&self.text)
            .trim();
        let words = shlex::split(text)?;
        if words.len() != 1 {
            return None;
        }
        let (name, _) = text.split_once('=')?;
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        valid.then(|| (name.to_owned(), text[name.len() + 1..].to_owned()))
    }

    /// The words of the command, unquoted (`None` if quotes are unbalanced).
    pub fn words(&self) -> Option<Vec<String>> {
        shlex::split(&self.text)
    }
}

/// The fenced shell blocks of a document.
pub fn shell_blocks(doc: &str, markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut current: Option<Block> = None;
    for (event, range) in Parser::new(markdown).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                // The language is the info string's first word (`sh`,
                // `console`); `{.sh}`-style attributes are not used here.
                let lang = info
                    .split(|c: char| c.is_whitespace() || c == ',')
                    .next()
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                if SHELL_LANGUAGES.contains(&lang.as_str()) {
                    current = Some(Block {
                        doc: doc.to_owned(),
                        line: line_of(markdown, range.start),
                        lang,
                        text: String::new(),
                    });
                }
            }
            Event::Text(t) => {
                if let Some(b) = current.as_mut() {
                    b.text.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some(b) = current.take() {
                    blocks.push(b);
                }
            }
            _ => {}
        }
    }
    blocks
}

/// The 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

/// Splits a block into its commands. In a `console` block only the lines
/// after a `$ ` prompt (and their continuations) are commands; the others
/// are output.
pub fn commands(block: &Block) -> Result<Vec<Command>, String> {
    if block.lang == "console" {
        return console_commands(block);
    }
    split_commands(&block.text, block.line + 1)
        .map_err(|(line, e)| format!("{}:{line}: {e}", block.doc))
}

fn console_commands(block: &Block) -> Result<Vec<Command>, String> {
    let mut out = Vec::new();
    let lines: Vec<&str> = block.text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let Some(first) = lines[i].trim_start().strip_prefix("$ ") else {
            i += 1;
            continue;
        };
        // Gather the lines of this command: continue while the text so far
        // is not a complete command.
        let start = i;
        let mut text = first.to_owned();
        loop {
            match split_commands(&text, block.line + 1 + start) {
                Ok(cmds) => {
                    out.extend(cmds);
                    break;
                }
                Err(_) if i + 1 < lines.len() => {
                    i += 1;
                    text.push('\n');
                    text.push_str(lines[i]);
                }
                Err((line, e)) => return Err(format!("{}:{line}: {e}", block.doc)),
            }
        }
        i += 1;
    }
    Ok(out)
}

/// Splits shell text into commands; `first_line` is the line number of its
/// first line. An error names the line a command started on.
pub fn split_commands(text: &str, first_line: usize) -> Result<Vec<Command>, (usize, String)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut cur_line = first_line;
    let mut line = first_line;
    let (mut single, mut double) = (false, false);
    let mut chars = text.chars().peekable();
    let finish = |cur: &mut String, start: usize, out: &mut Vec<Command>| {
        let mut t = cur.trim().to_owned();
        cur.clear();
        if t.is_empty() {
            return;
        }
        let background = t.ends_with('&') && !t.ends_with("&&") && !t.ends_with("\\&");
        if background {
            t.pop();
            t = t.trim_end().to_owned();
        }
        out.push(Command {
            line: start,
            text: t,
            background,
        });
    };
    while let Some(c) = chars.next() {
        if cur.trim().is_empty() {
            cur_line = line;
        }
        match c {
            '\n' => {
                line += 1;
                if single || double {
                    cur.push('\n');
                } else {
                    finish(&mut cur, cur_line, &mut out);
                }
            }
            '\'' if !double => {
                single = !single;
                cur.push(c);
            }
            '"' if !single => {
                double = !double;
                cur.push(c);
            }
            '\\' if !single => match chars.next() {
                // A continuation: the next line joins this one.
                Some('\n') => {
                    line += 1;
                    if double {
                        // Inside double quotes bash drops `\<newline>` too.
                    } else {
                        while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
                            chars.next();
                        }
                        if !cur.ends_with(' ') {
                            cur.push(' ');
                        }
                    }
                }
                Some(n) => {
                    cur.push('\\');
                    cur.push(n);
                }
                None => {
                    return Err((
                        cur_line,
                        format!("unfinished continuation in {:?}", cur.trim()),
                    ));
                }
            },
            '#' if !single && !double && (cur.is_empty() || cur.ends_with([' ', '\t'])) => {
                // A comment, up to the end of the line (the newline stays).
                while chars.peek().is_some_and(|c| *c != '\n') {
                    chars.next();
                }
            }
            _ => cur.push(c),
        }
    }
    if single || double {
        return Err((cur_line, format!("unterminated quote in {:?}", cur.trim())));
    }
    finish(&mut cur, cur_line, &mut out);
    Ok(out)
}

/// The `<name>` placeholders of a command, in order (`<taskId>`), outside
/// quotes or inside; a redirection such as `< file` is not one.
pub fn placeholders(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find('<') {
        let after = &rest[i + 1..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(after.len());
        if end > 0
            && after[..1].chars().all(|c| c.is_ascii_alphabetic())
            && after[end..].starts_with('>')
        {
            let p = format!("<{}>", &after[..end]);
            if !out.contains(&p) {
                out.push(p);
            }
            rest = &after[end + 1..];
        } else {
            rest = after;
        }
    }
    out
}

/// The forms of a command written with optional parts in brackets
/// (`a2a task get <id> [--history 5]`): first without every optional part,
/// then with all of them. A bracket counts as notation when it opens a
/// word outside quotes and what follows starts with `-` or `<`.
pub fn optional_forms(text: &str) -> Vec<String> {
    let mut without = String::new();
    let mut with = String::new();
    let mut found = false;
    let (mut single, mut double) = (false, false);
    let mut depth = 0usize;
    let mut chars = text.chars().peekable();
    let mut prev = ' ';
    while let Some(c) = chars.next() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            _ => {}
        }
        let quoted = single || double;
        if !quoted
            && c == '['
            && prev.is_whitespace()
            && chars.peek().is_some_and(|n| *n == '-' || *n == '<')
        {
            if depth == 0 {
                // The space before the optional part goes with it.
                without.truncate(without.trim_end_matches(' ').len());
            }
            depth += 1;
            found = true;
            prev = c;
            continue;
        }
        if !quoted && c == ']' && depth > 0 {
            depth -= 1;
            prev = c;
            continue;
        }
        with.push(c);
        if depth == 0 {
            without.push(c);
        }
        prev = c;
    }
    if !found {
        return vec![text.to_owned()];
    }
    vec![without.trim().to_owned(), with.trim().to_owned()]
}

/// Replaces `from` by `to` where it stands alone as a number (not inside a
/// longer run of digits): the documented ports.
pub fn replace_number(text: &str, from: &str, to: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (i, _) in text.match_indices(from) {
        let before = text[..i]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_digit());
        let after = text[i + from.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit());
        if i < last || before || after {
            continue;
        }
        out.push_str(&text[last..i]);
        out.push_str(to);
        last = i + from.len();
    }
    out.push_str(&text[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str) -> Vec<Command> {
        split_commands(text, 1).unwrap()
    }

    #[test]
    fn finds_shell_blocks_only() {
        let md = "# T\n\n```sh\na2a card get\n```\n\n```rust\nfn main() {}\n```\n\n~~~bash\nls\n~~~\n\n    indented code\n\n```console\n$ a2a x\nout\n```\n\n```json\n{}\n```\n";
        let b = shell_blocks("T.md", md);
        assert_eq!(b.len(), 3);
        assert_eq!(b[0].line, 3);
        assert_eq!(b[0].text, "a2a card get\n");
        assert_eq!(b[1].lang, "bash");
        assert_eq!(b[1].line, 11);
        assert_eq!(b[2].lang, "console");
    }

    #[test]
    fn comments_respect_quotes() {
        let c = split("a2a send -a $A \"a # b\" 'c # d'   # the comment\n");
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].text, "a2a send -a $A \"a # b\" 'c # d'");
        // `#` inside a word is not a comment.
        assert_eq!(split("echo a#b")[0].text, "echo a#b");
        // A comment-only line is no command.
        assert!(split("# only a comment\n\n").is_empty());
    }

    #[test]
    fn continuations_are_joined() {
        let c = split(
            "a2a send --text x --file r.pdf \\\n        --data - < p.json    # parts\nnext\n",
        );
        assert_eq!(c.len(), 2);
        assert_eq!(
            c[0].text,
            "a2a send --text x --file r.pdf --data - < p.json"
        );
        assert_eq!(c[0].line, 1);
        assert_eq!(c[1].text, "next");
        assert_eq!(c[1].line, 3);
    }

    #[test]
    fn quoted_arguments_span_lines() {
        let c =
            split("curl -s http://h/ -d '{\"a\":1,\n  \"b\":\"# not a comment\"}'\ncurl -sN x\n");
        assert_eq!(c.len(), 2);
        assert_eq!(
            c[0].text,
            "curl -s http://h/ -d '{\"a\":1,\n  \"b\":\"# not a comment\"}'"
        );
        assert_eq!(c[1].line, 3);
        assert!(split_commands("echo 'open\n", 7).is_err_and(|(l, _)| l == 7));
    }

    #[test]
    fn background_jobs_and_assignments() {
        let c =
            split("a2a serve --port 8080 &          # or: x\nA=127.0.0.1:8080   # host\na && b\n");
        assert!(c[0].background);
        assert_eq!(c[0].text, "a2a serve --port 8080");
        assert!(!c[1].background);
        assert_eq!(
            c[1].assignment(),
            Some(("A".to_owned(), "127.0.0.1:8080".to_owned()))
        );
        assert!(!c[2].background);
        assert_eq!(c[2].assignment(), None);
        assert_eq!(split("FOO=1 a2a x")[0].assignment(), None);
        assert_eq!(
            split("export T='a b'")[0].assignment(),
            Some(("T".to_owned(), "'a b'".to_owned()))
        );
    }

    #[test]
    fn console_prompts() {
        let b = Block {
            doc: "D.md".into(),
            line: 10,
            lang: "console".into(),
            text: "$ a2a card get \\\n  -a x\nName: Echo\n$ curl -d '{\n}'\n{}\n".into(),
        };
        let c = commands(&b).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].text, "a2a card get -a x");
        assert_eq!(c[0].line, 11);
        assert_eq!(c[1].text, "curl -d '{\n}'");
        assert_eq!(c[1].line, 14);
    }

    #[test]
    fn placeholders_and_redirections() {
        assert_eq!(
            placeholders("a2a x <taskId> [<configId>] < params.json <taskId>"),
            ["<taskId>", "<configId>"]
        );
        assert!(placeholders("a < b >c").is_empty());
    }

    #[test]
    fn optional_parts() {
        assert_eq!(
            optional_forms("a2a task get -a $A <taskId> [--history 5]"),
            [
                "a2a task get -a $A <taskId>",
                "a2a task get -a $A <taskId> --history 5"
            ]
        );
        assert_eq!(
            optional_forms("a2a x [--page-size 20 --all] y"),
            ["a2a x y", "a2a x --page-size 20 --all y"]
        );
        // Not notation: a test bracket, a quoted bracket.
        assert_eq!(optional_forms("[ -f x ]"), ["[ -f x ]"]);
        assert_eq!(optional_forms("echo '[--x]'"), ["echo '[--x]'"]);
    }

    #[test]
    fn ports_alone() {
        assert_eq!(
            replace_number("a:8080 b 18080 80801 --port 8080", "8080", "40001"),
            "a:40001 b 18080 80801 --port 40001"
        );
    }
}
