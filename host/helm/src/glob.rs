//! Glob matching: Go's `path/filepath.Match` (used by `.helmignore` and `--show-only`) and
//! gobwas/glob with `/` as separator (used by `.Files.Glob`, where `**` crosses directories).

fn class_match(pat: &[char], i: &mut usize, c: char) -> Option<bool> {
    // pat[*i] is just after '['
    let mut negate = false;
    if *i < pat.len() && (pat[*i] == '^' || pat[*i] == '!') {
        negate = true;
        *i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while *i < pat.len() {
        if pat[*i] == ']' && !first {
            *i += 1;
            return Some(matched != negate);
        }
        first = false;
        let mut lo = pat[*i];
        if lo == '\\' {
            *i += 1;
            lo = *pat.get(*i)?;
        }
        *i += 1;
        let mut hi = lo;
        if *i + 1 < pat.len() && pat[*i] == '-' && pat[*i + 1] != ']' {
            hi = pat[*i + 1];
            if hi == '\\' {
                hi = *pat.get(*i + 2)?;
                *i += 1;
            }
            *i += 2;
        }
        if lo <= c && c <= hi {
            matched = true;
        }
    }
    None
}

fn match_from(pat: &[char], name: &[char], sep_star: bool) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pat.len() {
            match pat[p] {
                '*' => {
                    let double = sep_star && p + 1 < pat.len() && pat[p + 1] == '*';
                    if double {
                        // '**' matches anything including '/'
                        let rest = &pat[p + 2..];
                        for k in n..=name.len() {
                            if match_from(rest, &name[k..], sep_star) {
                                return true;
                            }
                        }
                        return false;
                    }
                    star = Some((p, n));
                    p += 1;
                    continue;
                }
                '?' if n < name.len() && name[n] != '/' => {
                    p += 1;
                    n += 1;
                    continue;
                }
                '[' if n < name.len() && name[n] != '/' => {
                    let mut i = p + 1;
                    if let Some(true) = class_match(pat, &mut i, name[n]) {
                        p = i;
                        n += 1;
                        continue;
                    }
                }
                '\\' if p + 1 < pat.len() && n < name.len() && pat[p + 1] == name[n] => {
                    p += 2;
                    n += 1;
                    continue;
                }
                c if c != '?' && c != '[' && c != '\\' && n < name.len() && c == name[n] => {
                    p += 1;
                    n += 1;
                    continue;
                }
                _ => {}
            }
        } else if n == name.len() {
            return true;
        }
        // backtrack: let the last '*' eat one more non-separator char
        match star {
            Some((sp, sn)) if sn < name.len() && name[sn] != '/' => {
                star = Some((sp, sn + 1));
                p = sp + 1;
                n = sn + 1;
            }
            _ => return false,
        }
    }
}

/// Go `filepath.Match` (on `/`-separated paths).
pub fn go_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    match_from(&p, &n, false)
}

/// gobwas/glob `Compile(pattern, '/')` matching.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    match_from(&p, &n, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching() {
        assert!(go_match(
            "templates/subdir/role*",
            "templates/subdir/rolebinding.yaml"
        ));
        assert!(!go_match("templates/*", "templates/a/b.yaml"));
        assert!(go_match("*.txt", "a.txt"));
        assert!(go_match("[a-c]x", "bx"));
        assert!(glob_match("files/**", "files/a/b.txt"));
        assert!(glob_match("files/*.conf", "files/x.conf"));
        assert!(!glob_match("files/*.conf", "files/a/x.conf"));
    }
}
