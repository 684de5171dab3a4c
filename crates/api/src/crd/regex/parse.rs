//! The parser of Go regexp syntax: an AST of char classes, assertions,
//! concatenations, alternations and bounded repeats, with Go's limits
//! (repeat counts up to 1000, bounded nesting) and error wording.

use super::{Ast, Class, Error, Look};

#[derive(Debug, Clone, Copy, Default)]
struct Flags {
    fold: bool,
    multi_line: bool,
    dot_nl: bool,
}

pub(super) struct Parser<'a> {
    src: &'a str,
    chars: Vec<char>,
    pos: usize,
    flags: Flags,
    depth: usize,
}

const MAX_REPEAT: u32 = 1000;

pub(super) fn err(code: &'static str, expr: impl Into<String>) -> Error {
    Error {
        code,
        expr: expr.into(),
    }
}

impl Parser<'_> {
    pub(super) fn new(src: &str) -> Parser<'_> {
        Parser {
            src,
            chars: src.chars().collect(),
            pos: 0,
            flags: Flags::default(),
            depth: 0,
        }
    }

    pub(super) fn done(&self) -> bool {
        self.pos >= self.chars.len()
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }
    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn rest(&self, from: usize) -> String {
        self.chars.get(from..).unwrap_or_default().iter().collect()
    }
    fn slice(&self, from: usize, to: usize) -> String {
        self.chars
            .get(from..to)
            .unwrap_or_default()
            .iter()
            .collect()
    }

    pub(super) fn parse_alt(&mut self) -> Result<Ast, Error> {
        self.depth += 1;
        if self.depth > 250 {
            return Err(err("expression nests too deeply", self.src));
        }
        let mut alts = vec![self.parse_concat()?];
        while self.eat('|') {
            alts.push(self.parse_concat()?);
        }
        self.depth -= 1;
        Ok(if alts.len() == 1 {
            alts.pop().unwrap_or(Ast::Empty)
        } else {
            Ast::Alt(alts)
        })
    }

    fn parse_concat(&mut self) -> Result<Ast, Error> {
        let mut items: Vec<Ast> = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let start = self.pos;
            let atom = match self.parse_atom()? {
                Some(a) => a,
                None => continue,
            };
            let atom = self.parse_repeats(atom, start)?;
            items.push(atom);
        }
        Ok(match items.len() {
            0 => Ast::Empty,
            1 => items.pop().unwrap_or(Ast::Empty),
            _ => Ast::Concat(items),
        })
    }

    fn parse_repeats(&mut self, mut atom: Ast, start: usize) -> Result<Ast, Error> {
        let mut repeated = false;
        loop {
            let op_start = self.pos;
            let (min, max) = match self.peek() {
                Some('*') => {
                    self.pos += 1;
                    (0, None)
                }
                Some('+') => {
                    self.pos += 1;
                    (1, None)
                }
                Some('?') => {
                    self.pos += 1;
                    (0, Some(1))
                }
                Some('{') => match self.parse_counts()? {
                    Some(r) => r,
                    None => return Ok(atom),
                },
                _ => return Ok(atom),
            };
            if repeated {
                return Err(err(
                    "invalid nested repetition operator",
                    self.slice(op_start.saturating_sub(1), self.pos),
                ));
            }
            if matches!(atom, Ast::Empty) {
                return Err(err(
                    "missing argument to repetition operator",
                    self.slice(op_start, self.pos),
                ));
            }
            self.eat('?');
            if max.is_some_and(|m| m < min)
                || min > MAX_REPEAT
                || max.is_some_and(|m| m > MAX_REPEAT)
            {
                return Err(err("invalid repeat count", self.slice(op_start, self.pos)));
            }
            let _ = start;
            atom = Ast::Repeat(Box::new(atom), min, max);
            repeated = true;
        }
    }

    /// `{n}`, `{n,}`, `{n,m}`; a `{` not of that form is a literal.
    fn parse_counts(&mut self) -> Result<Option<(u32, Option<u32>)>, Error> {
        let save = self.pos;
        self.pos += 1;
        let num = |p: &mut Self| -> Option<u32> {
            let s = p.pos;
            while p.peek().is_some_and(|c| c.is_ascii_digit()) {
                p.pos += 1;
            }
            if p.pos == s {
                return None;
            }
            Some(p.slice(s, p.pos).parse::<u32>().unwrap_or(u32::MAX))
        };
        let Some(min) = num(self) else {
            self.pos = save;
            return Ok(None);
        };
        let max = if self.eat(',') {
            if self.peek() == Some('}') {
                None
            } else {
                match num(self) {
                    Some(m) => Some(m),
                    None => {
                        self.pos = save;
                        return Ok(None);
                    }
                }
            }
        } else {
            Some(min)
        };
        if !self.eat('}') {
            self.pos = save;
            return Ok(None);
        }
        Ok(Some((min, max)))
    }

    fn literal(&self, c: char) -> Ast {
        let mut cl = Class::one(c);
        if self.flags.fold {
            cl.add_folded();
        }
        Ast::Class(cl)
    }

    fn parse_atom(&mut self) -> Result<Option<Ast>, Error> {
        let start = self.pos;
        let Some(c) = self.peek() else {
            return Ok(Some(Ast::Empty));
        };
        self.pos += 1;
        Ok(Some(match c {
            '(' => return self.parse_group(start),
            '[' => Ast::Class(self.parse_class(start)?),
            '.' => {
                let mut cl = Class::one('\n');
                cl.negated = true;
                if self.flags.dot_nl {
                    cl.ranges.clear();
                }
                Ast::Class(cl)
            }
            '^' => Ast::Assert(if self.flags.multi_line {
                Look::LineStart
            } else {
                Look::TextStart
            }),
            '$' => Ast::Assert(if self.flags.multi_line {
                Look::LineEnd
            } else {
                Look::TextEnd
            }),
            '\\' => self.parse_escape(start)?,
            '*' | '+' | '?' => {
                return Err(err(
                    "missing argument to repetition operator",
                    c.to_string(),
                ))
            }
            '{' => {
                self.pos = start;
                if self.parse_counts()?.is_some() {
                    return Err(err(
                        "missing argument to repetition operator",
                        self.slice(start, self.pos),
                    ));
                }
                self.pos = start + 1;
                self.literal('{')
            }
            other => self.literal(other),
        }))
    }

    fn parse_group(&mut self, start: usize) -> Result<Option<Ast>, Error> {
        if self.eat('?') {
            // (?P<name>re), (?<name>re), (?flags), (?flags:re)
            if self.peek() == Some('P') || self.peek() == Some('<') {
                self.eat('P');
                if !self.eat('<') {
                    return Err(err(
                        "invalid or unsupported Perl syntax",
                        self.slice(start, self.pos.min(start + 3)),
                    ));
                }
                let name_start = self.pos;
                while self.peek().is_some_and(|c| c != '>') {
                    self.pos += 1;
                }
                let name = self.slice(name_start, self.pos);
                if !self.eat('>') {
                    return Err(err("invalid named capture", self.rest(start)));
                }
                if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                    return Err(err("invalid named capture", self.slice(start, self.pos)));
                }
                return self.group_body(start, self.flags).map(Some);
            }
            let mut flags = self.flags;
            let mut negate = false;
            loop {
                let Some(c) = self.peek() else {
                    return Err(err("missing closing )", self.rest(start)));
                };
                self.pos += 1;
                match c {
                    'i' => flags.fold = !negate,
                    'm' => flags.multi_line = !negate,
                    's' => flags.dot_nl = !negate,
                    'U' => {}
                    '-' if !negate => negate = true,
                    ')' => {
                        self.flags = flags;
                        return Ok(None);
                    }
                    ':' => return self.group_body(start, flags).map(Some),
                    _ => {
                        return Err(err(
                            "invalid or unsupported Perl syntax",
                            self.slice(start, self.pos),
                        ))
                    }
                }
            }
        }
        self.group_body(start, self.flags).map(Some)
    }

    fn group_body(&mut self, start: usize, flags: Flags) -> Result<Ast, Error> {
        let outer = self.flags;
        self.flags = flags;
        let inner = self.parse_alt()?;
        self.flags = outer;
        if !self.eat(')') {
            return Err(err("missing closing )", self.src));
        }
        let _ = start;
        Ok(inner)
    }

    fn parse_escape(&mut self, start: usize) -> Result<Ast, Error> {
        let Some(c) = self.peek() else {
            return Err(err("trailing backslash at end of expression", ""));
        };
        self.pos += 1;
        Ok(match c {
            'A' => Ast::Assert(Look::TextStart),
            'z' => Ast::Assert(Look::TextEnd),
            'b' => Ast::Assert(Look::WordBoundary),
            'B' => Ast::Assert(Look::NotWordBoundary),
            'Q' => {
                let s = self.pos;
                let text = self.rest(s);
                let (lit, consumed) = match text.find("\\E") {
                    Some(i) => (
                        text.get(..i).unwrap_or("").to_string(),
                        text.get(..i).map_or(0, |x| x.chars().count()) + 2,
                    ),
                    None => (text.clone(), text.chars().count()),
                };
                self.pos += consumed;
                Ast::Concat(lit.chars().map(|c| self.literal(c)).collect())
            }
            _ => {
                self.pos = start;
                let mut cl = self.parse_class_escape()?;
                if self.flags.fold {
                    cl.add_folded();
                }
                Ast::Class(cl)
            }
        })
    }

    /// An escape that stands for a char or a class (after `\`), at `pos`
    /// pointing to the backslash.
    fn parse_class_escape(&mut self) -> Result<Class, Error> {
        let start = self.pos;
        self.pos += 1;
        let Some(c) = self.peek() else {
            return Err(err("trailing backslash at end of expression", ""));
        };
        self.pos += 1;
        let perl = |ranges: &[(char, char)], negated: bool| Class {
            ranges: ranges.to_vec(),
            negated,
        };
        const D: &[(char, char)] = &[('0', '9')];
        const S: &[(char, char)] = &[('\t', '\n'), ('\x0c', '\r'), (' ', ' ')];
        const W: &[(char, char)] = &[('0', '9'), ('A', 'Z'), ('_', '_'), ('a', 'z')];
        Ok(match c {
            'd' => perl(D, false),
            'D' => perl(D, true),
            's' => perl(S, false),
            'S' => perl(S, true),
            'w' => perl(W, false),
            'W' => perl(W, true),
            'p' | 'P' => {
                let name = if self.eat('{') {
                    let s = self.pos;
                    while self.peek().is_some_and(|c| c != '}') {
                        self.pos += 1;
                    }
                    let n = self.slice(s, self.pos);
                    if !self.eat('}') {
                        return Err(err("invalid character class range", self.rest(start)));
                    }
                    n
                } else {
                    match self.peek() {
                        Some(x) => {
                            self.pos += 1;
                            x.to_string()
                        }
                        None => return Err(err("invalid character class range", self.rest(start))),
                    }
                };
                let (name, neg) = match name.strip_prefix('^') {
                    Some(n) => (n.to_string(), true),
                    None => (name, false),
                };
                let ranges = unicode_class(&name).ok_or_else(|| {
                    err("invalid character class range", self.slice(start, self.pos))
                })?;
                perl(&ranges, (c == 'P') != neg)
            }
            'a' => Class::one('\x07'),
            'f' => Class::one('\x0c'),
            't' => Class::one('\t'),
            'n' => Class::one('\n'),
            'r' => Class::one('\r'),
            'v' => Class::one('\x0b'),
            '0'..='7' => {
                // Octal: \0, \012 (Go allows \1-\7 only as octal when
                // followed by more digits; a bare \1 is a backreference).
                let s = self.pos - 1;
                while self.pos - s < 3 && self.peek().is_some_and(|d| ('0'..='7').contains(&d)) {
                    self.pos += 1;
                }
                let digits = self.slice(s, self.pos);
                if c != '0' && digits.len() == 1 {
                    return Err(err("invalid escape sequence", self.slice(start, self.pos)));
                }
                let v = u32::from_str_radix(&digits, 8).unwrap_or(0);
                Class::one(char::from_u32(v).unwrap_or('\0'))
            }
            'x' => {
                let v = if self.eat('{') {
                    let s = self.pos;
                    while self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                        self.pos += 1;
                    }
                    let h = self.slice(s, self.pos);
                    if !self.eat('}') || h.is_empty() {
                        return Err(err("invalid escape sequence", self.slice(start, self.pos)));
                    }
                    u32::from_str_radix(&h, 16).ok()
                } else {
                    let h = self.slice(self.pos, self.pos + 2);
                    if h.len() != 2 || !h.chars().all(|c| c.is_ascii_hexdigit()) {
                        return Err(err(
                            "invalid escape sequence",
                            self.slice(start, (self.pos + 2).min(self.chars.len())),
                        ));
                    }
                    self.pos += 2;
                    u32::from_str_radix(&h, 16).ok()
                };
                match v.and_then(char::from_u32) {
                    Some(ch) => Class::one(ch),
                    None => {
                        return Err(err("invalid escape sequence", self.slice(start, self.pos)))
                    }
                }
            }
            c if c.is_ascii_punctuation() => Class::one(c),
            _ => return Err(err("invalid escape sequence", self.slice(start, self.pos))),
        })
    }

    /// A bracketed class; `pos` is just past `[`.
    fn parse_class(&mut self, start: usize) -> Result<Class, Error> {
        let mut cl = Class::default();
        if self.eat('^') {
            cl.negated = true;
        }
        let mut first = true;
        loop {
            let Some(c) = self.peek() else {
                return Err(err("missing closing ]", self.rest(start)));
            };
            if c == ']' && !first {
                self.pos += 1;
                break;
            }
            first = false;
            // POSIX [:alpha:]
            if c == '[' && self.chars.get(self.pos + 1) == Some(&':') {
                let text = self.rest(self.pos);
                if let Some(end) = text.find(":]") {
                    let name = text.get(2..end).unwrap_or("");
                    let (name, neg) = match name.strip_prefix('^') {
                        Some(n) => (n, true),
                        None => (name, false),
                    };
                    let ranges = posix_class(name).ok_or_else(|| {
                        err(
                            "invalid character class range",
                            text.get(..end + 2).unwrap_or(""),
                        )
                    })?;
                    self.pos += text.get(..end + 2).map_or(0, |x| x.chars().count());
                    if neg {
                        cl.ranges.extend(negate(&ranges));
                    } else {
                        cl.ranges.extend(ranges);
                    }
                    continue;
                }
            }
            let item_start = self.pos;
            let lo = self.class_char()?;
            let lo = match lo {
                Err(set) => {
                    // \d and friends inside a class
                    if set.negated {
                        cl.ranges.extend(negate(&set.ranges));
                    } else {
                        cl.ranges.extend(set.ranges);
                    }
                    continue;
                }
                Ok(ch) => ch,
            };
            if self.peek() == Some('-') && self.chars.get(self.pos + 1).is_some_and(|c| *c != ']') {
                self.pos += 1;
                let hi = match self.class_char()? {
                    Ok(h) => h,
                    Err(_) => {
                        return Err(err(
                            "invalid character class range",
                            self.slice(item_start, self.pos),
                        ))
                    }
                };
                if hi < lo {
                    return Err(err(
                        "invalid character class range",
                        self.slice(item_start, self.pos),
                    ));
                }
                cl.ranges.push((lo, hi));
            } else {
                cl.ranges.push((lo, lo));
            }
        }
        if self.flags.fold {
            cl.add_folded();
        }
        Ok(cl)
    }

    /// One char of a class, or a whole escaped class (`\d`).
    fn class_char(&mut self) -> Result<Result<char, Class>, Error> {
        let Some(c) = self.peek() else {
            return Err(err("missing closing ]", self.src));
        };
        if c == '\\' {
            let cl = self.parse_class_escape()?;
            if !cl.negated && cl.ranges.len() == 1 {
                if let Some(&(a, b)) = cl.ranges.first() {
                    if a == b {
                        return Ok(Ok(a));
                    }
                }
            }
            return Ok(Err(cl));
        }
        self.pos += 1;
        Ok(Ok(c))
    }
}

fn negate(ranges: &[(char, char)]) -> Vec<(char, char)> {
    let mut sorted: Vec<(u32, u32)> = ranges.iter().map(|(a, b)| (*a as u32, *b as u32)).collect();
    sorted.sort_unstable();
    let mut gaps: Vec<(u32, u32)> = Vec::new();
    let mut next: u32 = 0;
    for (a, b) in sorted {
        if a > next {
            gaps.push((next, a - 1));
        }
        next = next.max(b.saturating_add(1));
    }
    if next <= 0x10FFFF {
        gaps.push((next, 0x10FFFF));
    }
    let mut out = Vec::new();
    for (a, b) in gaps {
        // split around the surrogates, which are not chars
        for (x, y) in [(a, b.min(0xD7FF)), (a.max(0xE000), b)] {
            if x <= y {
                if let (Some(x), Some(y)) = (char::from_u32(x), char::from_u32(y)) {
                    out.push((x, y));
                }
            }
        }
    }
    out
}

fn posix_class(name: &str) -> Option<Vec<(char, char)>> {
    Some(match name {
        "alnum" => vec![('0', '9'), ('A', 'Z'), ('a', 'z')],
        "alpha" => vec![('A', 'Z'), ('a', 'z')],
        "ascii" => vec![('\0', '\x7f')],
        "blank" => vec![('\t', '\t'), (' ', ' ')],
        "cntrl" => vec![('\0', '\x1f'), ('\x7f', '\x7f')],
        "digit" => vec![('0', '9')],
        "graph" => vec![('!', '~')],
        "lower" => vec![('a', 'z')],
        "print" => vec![(' ', '~')],
        "punct" => vec![('!', '/'), (':', '@'), ('[', '`'), ('{', '~')],
        "space" => vec![('\t', '\r'), (' ', ' ')],
        "upper" => vec![('A', 'Z')],
        "word" => vec![('0', '9'), ('A', 'Z'), ('_', '_'), ('a', 'z')],
        "xdigit" => vec![('0', '9'), ('A', 'F'), ('a', 'f')],
        _ => return None,
    })
}

/// Unicode classes by scanning chars with std's predicates (approximate
/// categories: L, Lu, Ll, N, Nd, S, P, Z, and `Any`).
fn unicode_class(name: &str) -> Option<Vec<(char, char)>> {
    let pred: fn(char) -> bool = match name {
        "L" | "Letter" => char::is_alphabetic,
        "Lu" => char::is_uppercase,
        "Ll" => char::is_lowercase,
        "N" | "Nd" => char::is_numeric,
        "Z" | "Zs" => char::is_whitespace,
        "P" => |c: char| c.is_ascii_punctuation() && !"$+<=>^`|~".contains(c),
        "S" => |c: char| {
            "$+<=>^`|~".contains(c)
                || (!c.is_ascii() && !c.is_alphanumeric() && !c.is_whitespace() && !c.is_control())
        },
        "Any" => |_| true,
        "Greek" => |c: char| {
            ('\u{0370}'..='\u{03FF}').contains(&c) || ('\u{1F00}'..='\u{1FFF}').contains(&c)
        },
        "Han" => |c: char| {
            ('\u{4E00}'..='\u{9FFF}').contains(&c) || ('\u{3400}'..='\u{4DBF}').contains(&c)
        },
        "Latin" => |c: char| {
            c.is_ascii_alphabetic() || (('\u{00C0}'..='\u{024F}').contains(&c) && c.is_alphabetic())
        },
        "Cyrillic" => |c: char| ('\u{0400}'..='\u{04FF}').contains(&c),
        _ => return None,
    };
    let mut out: Vec<(char, char)> = Vec::new();
    let mut run: Option<(char, char)> = None;
    for u in 0..=0x10FFFFu32 {
        let Some(c) = char::from_u32(u) else { continue };
        if pred(c) {
            run = match run {
                Some((a, b)) if b as u32 + 1 == u => Some((a, c)),
                Some(r) => {
                    out.push(r);
                    Some((c, c))
                }
                None => Some((c, c)),
            };
        }
    }
    out.extend(run);
    Some(out)
}
