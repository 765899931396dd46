//! Lexer for Go `text/template` source: text, `{{`/`}}` with `-` trim markers, comments and the
//! tokens inside actions (identifiers, fields, variables, strings, numbers, punctuation).

use super::TemplateError;

/// A token kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// Literal text between actions (already trimmed).
    Text(String),
    /// `{{`
    Open,
    /// `}}`
    Close,
    /// identifier or keyword
    Ident(String),
    /// `.name`
    Field(String),
    /// `$name` or `$`
    Var(String),
    /// interpreted or raw string (decoded)
    Str(String),
    /// character constant (value)
    Char(i64),
    /// number text
    Number(String),
    /// `.` alone
    Dot,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `|`
    Pipe,
    /// `:=`
    Declare,
    /// `=`
    Assign,
    /// `,`
    Comma,
    /// end of input
    Eof,
}

/// A token with its byte position and whether whitespace preceded it.
#[derive(Debug, Clone)]
pub struct Token {
    pub tok: Tok,
    pub pos: usize,
    pub end: usize,
    pub space_before: bool,
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_alnum(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Tokenises a whole template.
pub fn lex(src: &str) -> Result<Vec<Token>, TemplateError> {
    let b = src.as_bytes();
    let mut toks: Vec<Token> = Vec::new();
    let mut i = 0;
    let mut trim_next_text = false;
    while i < b.len() {
        // text up to the next "{{"
        let start = i;
        let next = src[i..].find("{{").map(|p| p + i).unwrap_or(b.len());
        let mut text = &src[start..next];
        if trim_next_text {
            text = text.trim_start_matches([' ', '\t', '\r', '\n']);
        }
        if next >= b.len() {
            if !text.is_empty() {
                toks.push(text_token(text, start, next));
            }
            break;
        }
        // left trim marker
        let mut j = next + 2;
        let trim_left = b.len() > j + 1 && b[j] == b'-' && is_space(b[j + 1]);
        if trim_left {
            text = text.trim_end_matches([' ', '\t', '\r', '\n']);
            j += 2;
        }
        if !text.is_empty() {
            toks.push(text_token(text, start, next));
        }
        if let Some((end, trim_right)) = lex_comment(src, next, j, trim_left)? {
            trim_next_text = trim_right;
            i = end;
            continue;
        }
        toks.push(Token {
            tok: Tok::Open,
            pos: next,
            end: j,
            space_before: false,
        });
        (i, trim_next_text) = lex_action(src, next, j, &mut toks)?;
    }
    toks.push(Token {
        tok: Tok::Eof,
        pos: b.len(),
        end: b.len(),
        space_before: false,
    });
    Ok(toks)
}

fn text_token(text: &str, pos: usize, end: usize) -> Token {
    Token {
        tok: Tok::Text(text.to_string()),
        pos,
        end,
        space_before: false,
    }
}

/// A comment action (`{{/* … */}}`, `{{- /* … */ -}}`) whose body starts after `j`: where it
/// ends and whether it trims the text after it; `None` if the action is not a comment.
fn lex_comment(
    src: &str,
    next: usize,
    j: usize,
    trim_left: bool,
) -> Result<Option<(usize, bool)>, TemplateError> {
    let b = src.as_bytes();
    let mut k = j;
    while k < b.len() && is_space(b[k]) {
        k += 1;
    }
    if !(src[k..].starts_with("/*") && (k == j || trim_left)) {
        return Ok(None);
    }
    let Some(endc) = src[k + 2..].find("*/") else {
        return Err(TemplateError::parse(src, next, "unclosed comment"));
    };
    let m = k + 2 + endc + 2;
    if src[m..].starts_with(" -}}")
        || src[m..].starts_with("\t-}}")
        || src[m..].starts_with("\n-}}")
    {
        Ok(Some((m + 4, true)))
    } else if src[m..].starts_with("}}") {
        Ok(Some((m + 2, false)))
    } else {
        Err(TemplateError::parse(
            src,
            m,
            "comment ends before closing delimiter",
        ))
    }
}

/// The tokens of the action opened at `next` whose body starts at `j`, up to and including
/// its `Close`: where the action ends and whether it trims the text after it (` -}}`).
fn lex_action(
    src: &str,
    next: usize,
    mut j: usize,
    toks: &mut Vec<Token>,
) -> Result<(usize, bool), TemplateError> {
    let b = src.as_bytes();
    let mut space = false;
    loop {
        if j >= b.len() {
            return Err(TemplateError::parse(src, next, "unclosed action"));
        }
        let c = b[j];
        if is_space(c) {
            // right trim marker " -}}"
            if src[j..].len() >= 4 && b[j + 1] == b'-' && src[j + 2..].starts_with("}}") {
                toks.push(Token {
                    tok: Tok::Close,
                    pos: j + 1,
                    end: j + 4,
                    space_before: true,
                });
                return Ok((j + 4, true));
            }
            space = true;
            j += 1;
            continue;
        }
        if src[j..].starts_with("}}") {
            toks.push(Token {
                tok: Tok::Close,
                pos: j,
                end: j + 2,
                space_before: space,
            });
            return Ok((j + 2, false));
        }
        let (tok, end) = lex_token(src, j)?;
        toks.push(Token {
            tok,
            pos: j,
            end,
            space_before: space,
        });
        space = false;
        j = end;
    }
}

/// The token at `j` inside an action (not a space, not `}}`) and where it ends.
fn lex_token(src: &str, j: usize) -> Result<(Tok, usize), TemplateError> {
    let b = src.as_bytes();
    let c = b[j];
    Ok(match c {
        b'(' => (Tok::LParen, j + 1),
        b')' => (Tok::RParen, j + 1),
        b'|' => (Tok::Pipe, j + 1),
        b',' => (Tok::Comma, j + 1),
        b'=' => (Tok::Assign, j + 1),
        b':' if b.get(j + 1) == Some(&b'=') => (Tok::Declare, j + 2),
        b':' => return Err(TemplateError::parse(src, j, "expected :=")),
        b'"' => {
            let (s, e) = lex_quote(src, j)?;
            (Tok::Str(s), e)
        }
        b'`' => {
            let Some(e) = src[j + 1..].find('`') else {
                return Err(TemplateError::parse(
                    src,
                    j,
                    "unterminated raw quoted string",
                ));
            };
            (Tok::Str(src[j + 1..j + 1 + e].to_string()), j + 2 + e)
        }
        b'\'' => {
            let (s, e) = lex_char(src, j)?;
            (Tok::Char(s), e)
        }
        b'$' => {
            let e = alnum_end(src, j + 1);
            (Tok::Var(src[j..e].to_string()), e)
        }
        b'.' => lex_dot(src, j),
        b'0'..=b'9' | b'-' | b'+' => {
            let e = scan_number(b, j);
            if e == j || (e == j + 1 && !b[j].is_ascii_digit()) {
                return Err(TemplateError::parse(
                    src,
                    j,
                    &format!("bad character {:?}", c as char),
                ));
            }
            (Tok::Number(src[j..e].to_string()), e)
        }
        _ => {
            let ch = src[j..].chars().next().unwrap();
            if !is_alnum(ch) {
                return Err(TemplateError::parse(
                    src,
                    j,
                    &format!(
                        "unexpected bad character U+{:04X} '{}' in command",
                        ch as u32, ch
                    ),
                ));
            }
            let e = alnum_end(src, j);
            (Tok::Ident(src[j..e].to_string()), e)
        }
    })
}

/// A field (`.name`), a number like `.5`, or dot.
fn lex_dot(src: &str, j: usize) -> (Tok, usize) {
    let b = src.as_bytes();
    if b.get(j + 1).is_some_and(|c| c.is_ascii_digit()) {
        let e = scan_number(b, j);
        return (Tok::Number(src[j..e].to_string()), e);
    }
    let e = alnum_end(src, j + 1);
    if e == j + 1 {
        (Tok::Dot, e)
    } else {
        (Tok::Field(src[j + 1..e].to_string()), e)
    }
}

/// Where the run of identifier characters starting at `from` ends.
fn alnum_end(src: &str, from: usize) -> usize {
    let mut e = from;
    for ch in src[from..].chars() {
        if is_alnum(ch) {
            e += ch.len_utf8();
        } else {
            break;
        }
    }
    e
}

fn scan_number(b: &[u8], mut j: usize) -> usize {
    if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
        j += 1;
    }
    while j < b.len() {
        let c = b[j];
        if c.is_ascii_alphanumeric() || c == b'.' || c == b'_' {
            j += 1;
        } else if (c == b'+' || c == b'-') && matches!(b[j - 1], b'e' | b'E' | b'p' | b'P') {
            // exponent sign only for non-hex or p-exponent
            j += 1;
        } else {
            break;
        }
    }
    j
}

fn lex_char(src: &str, start: usize) -> Result<(i64, usize), TemplateError> {
    let rest = &src[start + 1..];
    let mut it = rest.char_indices();
    let (_, c) = it
        .next()
        .ok_or_else(|| TemplateError::parse(src, start, "unterminated character constant"))?;
    let (v, used) = if c == '\\' {
        let (ch, n) = unescape(&rest[1..])
            .ok_or_else(|| TemplateError::parse(src, start, "bad escape in character constant"))?;
        (ch as i64, 1 + n)
    } else {
        (c as i64, c.len_utf8())
    };
    if !rest[used..].starts_with('\'') {
        return Err(TemplateError::parse(
            src,
            start,
            "unterminated character constant",
        ));
    }
    Ok((v, start + 1 + used + 1))
}

/// Decodes one escape (after the backslash); returns the char and the bytes consumed.
fn unescape(s: &str) -> Option<(char, usize)> {
    let c = s.chars().next()?;
    let simple = match c {
        'a' => Some('\x07'),
        'b' => Some('\x08'),
        'f' => Some('\x0c'),
        'n' => Some('\n'),
        'r' => Some('\r'),
        't' => Some('\t'),
        'v' => Some('\x0b'),
        '\\' => Some('\\'),
        '\'' => Some('\''),
        '"' => Some('"'),
        _ => None,
    };
    if let Some(ch) = simple {
        return Some((ch, 1));
    }
    let hex = |n: usize| -> Option<(char, usize)> {
        let h = s.get(1..1 + n)?;
        let v = u32::from_str_radix(h, 16).ok()?;
        Some((char::from_u32(v)?, 1 + n))
    };
    match c {
        'x' => hex(2),
        'u' => hex(4),
        'U' => hex(8),
        '0'..='7' => {
            let o = s.get(0..3)?;
            let v = u32::from_str_radix(o, 8).ok()?;
            Some((char::from_u32(v)?, 3))
        }
        _ => None,
    }
}

fn lex_quote(src: &str, start: usize) -> Result<(String, usize), TemplateError> {
    let mut out = String::new();
    let rest = &src[start + 1..];
    let mut idx = 0;
    let bytes = rest.as_bytes();
    while idx < bytes.len() {
        let c = rest[idx..].chars().next().unwrap();
        match c {
            '"' => return Ok((out, start + 1 + idx + 1)),
            '\n' => break,
            '\\' => {
                let (ch, n) = unescape(&rest[idx + 1..])
                    .ok_or_else(|| TemplateError::parse(src, start, "invalid syntax"))?;
                out.push(ch);
                idx += 1 + n;
            }
            c => {
                out.push(c);
                idx += c.len_utf8();
            }
        }
    }
    Err(TemplateError::parse(
        src,
        start,
        "unterminated quoted string",
    ))
}
