//! A small regular-expression engine for schema `pattern`s, with the
//! syntax of Go's regexp (RE2: no backreferences or lookaround) and its
//! linear-time guarantee: a parser to an AST, a compiler to a Thompson
//! program and a Pike VM that searches unanchored (a pattern matches
//! anywhere unless anchored, as `regexp.MatchString`). Parse errors are
//! worded as Go's `error parsing regexp: <code>: `<expr>``.

use std::fmt;

mod parse;

use parse::{err, Parser};

const MAX_PROG: usize = 50_000;

/// A compiled pattern.
#[derive(Debug, Clone)]
pub(crate) struct Regex {
    prog: Vec<Inst>,
}

/// A parse error, displayed as Go words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Error {
    code: &'static str,
    expr: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error parsing regexp: {}: `{}`", self.code, self.expr)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Ast {
    Empty,
    Class(Class),
    Assert(Look),
    Concat(Vec<Ast>),
    Alt(Vec<Ast>),
    Repeat(Box<Ast>, u32, Option<u32>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Look {
    LineStart,
    LineEnd,
    TextStart,
    TextEnd,
    WordBoundary,
    NotWordBoundary,
}

/// A set of chars as sorted ranges, possibly negated.
#[derive(Debug, Clone, PartialEq, Default)]
struct Class {
    ranges: Vec<(char, char)>,
    negated: bool,
}

impl Class {
    fn one(c: char) -> Class {
        Class {
            ranges: vec![(c, c)],
            negated: false,
        }
    }
    fn matches(&self, c: char) -> bool {
        self.ranges.iter().any(|(a, b)| *a <= c && c <= *b) != self.negated
    }
    fn add_folded(&mut self) {
        let mut extra = Vec::new();
        for &(a, b) in &self.ranges {
            let (lo, hi) = (a as u32, b as u32);
            if hi - lo > 2000 {
                continue;
            }
            for u in lo..=hi {
                if let Some(c) = char::from_u32(u) {
                    for f in c.to_lowercase().chain(c.to_uppercase()) {
                        if f != c {
                            extra.push((f, f));
                        }
                    }
                }
            }
        }
        self.ranges.extend(extra);
    }
}

#[derive(Debug, Clone)]
enum Inst {
    Class(Class),
    Assert(Look),
    Split(usize, usize),
    Jmp(usize),
    Match,
}

struct Compiler {
    prog: Vec<Inst>,
}

impl Compiler {
    fn emit(&mut self, i: Inst) -> Result<usize, Error> {
        if self.prog.len() >= MAX_PROG {
            return Err(err("expression too large", ""));
        }
        self.prog.push(i);
        Ok(self.prog.len() - 1)
    }
    fn patch(&mut self, at: usize, i: Inst) {
        if let Some(slot) = self.prog.get_mut(at) {
            *slot = i;
        }
    }
    fn compile(&mut self, ast: &Ast) -> Result<(), Error> {
        match ast {
            Ast::Empty => Ok(()),
            Ast::Class(c) => self.emit(Inst::Class(c.clone())).map(|_| ()),
            Ast::Assert(l) => self.emit(Inst::Assert(*l)).map(|_| ()),
            Ast::Concat(items) => items.iter().try_for_each(|a| self.compile(a)),
            Ast::Alt(alts) => {
                let mut jumps = Vec::new();
                for (i, a) in alts.iter().enumerate() {
                    if i + 1 < alts.len() {
                        let split = self.emit(Inst::Split(0, 0))?;
                        self.compile(a)?;
                        jumps.push(self.emit(Inst::Jmp(0))?);
                        let next = self.prog.len();
                        self.patch(split, Inst::Split(split + 1, next));
                    } else {
                        self.compile(a)?;
                    }
                }
                let end = self.prog.len();
                for j in jumps {
                    self.patch(j, Inst::Jmp(end));
                }
                Ok(())
            }
            Ast::Repeat(a, min, max) => {
                for _ in 0..*min {
                    self.compile(a)?;
                }
                match max {
                    None => {
                        let split = self.emit(Inst::Split(0, 0))?;
                        self.compile(a)?;
                        self.emit(Inst::Jmp(split))?;
                        let end = self.prog.len();
                        self.patch(split, Inst::Split(split + 1, end));
                    }
                    Some(max) => {
                        let mut splits = Vec::new();
                        for _ in *min..*max {
                            splits.push(self.emit(Inst::Split(0, 0))?);
                            self.compile(a)?;
                        }
                        let end = self.prog.len();
                        for s in splits {
                            self.patch(s, Inst::Split(s + 1, end));
                        }
                    }
                }
                Ok(())
            }
        }
    }
}

fn is_word(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
}

thread_local! {
    /// Compiled patterns by source: schemas repeat the same few patterns
    /// over every item of a list and every request.
    static CACHE: std::cell::RefCell<std::collections::HashMap<String, Result<std::rc::Rc<Regex>, Error>>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// `Regex::new` through a small per-thread cache.
pub(crate) fn cached(pattern: &str) -> Result<std::rc::Rc<Regex>, Error> {
    CACHE.with(|c| {
        if let Some(hit) = c.borrow().get(pattern) {
            return hit.clone();
        }
        let made = Regex::new(pattern).map(std::rc::Rc::new);
        let mut map = c.borrow_mut();
        if map.len() >= 256 {
            map.clear();
        }
        map.insert(pattern.to_string(), made.clone());
        made
    })
}

impl Regex {
    /// Parses and compiles `pattern` (Go syntax).
    pub(crate) fn new(pattern: &str) -> Result<Regex, Error> {
        let mut p = Parser::new(pattern);
        let ast = p.parse_alt()?;
        if !p.done() {
            return Err(err("unexpected )", pattern));
        }
        let mut c = Compiler { prog: Vec::new() };
        c.compile(&ast)?;
        c.emit(Inst::Match)?;
        Ok(Regex { prog: c.prog })
    }

    /// Whether the pattern matches anywhere in `text`.
    pub(crate) fn is_match(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        let n = self.prog.len();
        let mut clist: Vec<usize> = Vec::new();
        let mut nlist: Vec<usize> = Vec::new();
        let mut seen = vec![usize::MAX; n];
        let mut gen = 0usize;
        for i in 0..=chars.len() {
            let prev = if i == 0 {
                None
            } else {
                chars.get(i - 1).copied()
            };
            let cur = chars.get(i).copied();
            // a new thread at every position (unanchored search)
            if self.add(&mut clist, &mut seen, gen, 0, prev, cur) {
                return true;
            }
            gen += 1;
            nlist.clear();
            let next_cur = chars.get(i + 1).copied();
            for &pc in &clist {
                if let Some(Inst::Class(cl)) = self.prog.get(pc) {
                    if cur.is_some_and(|c| cl.matches(c))
                        && self.add(&mut nlist, &mut seen, gen, pc + 1, cur, next_cur)
                    {
                        return true;
                    }
                }
            }
            std::mem::swap(&mut clist, &mut nlist);
            if cur.is_none() {
                break;
            }
        }
        false
    }

    /// Adds `pc` and its epsilon closure at a position between `prev`
    /// and `cur`; true when it reaches Match.
    fn add(
        &self,
        list: &mut Vec<usize>,
        seen: &mut [usize],
        gen: usize,
        pc: usize,
        prev: Option<char>,
        cur: Option<char>,
    ) -> bool {
        let mut stack = vec![pc];
        while let Some(pc) = stack.pop() {
            match seen.get_mut(pc) {
                Some(s) if *s == gen => continue,
                Some(s) => *s = gen,
                None => continue,
            }
            match self.prog.get(pc) {
                Some(Inst::Match) => return true,
                Some(Inst::Jmp(t)) => stack.push(*t),
                Some(Inst::Split(a, b)) => {
                    stack.push(*b);
                    stack.push(*a);
                }
                Some(Inst::Assert(l)) => {
                    let ok = match l {
                        Look::TextStart => prev.is_none(),
                        Look::TextEnd => cur.is_none(),
                        Look::LineStart => prev.is_none() || prev == Some('\n'),
                        Look::LineEnd => cur.is_none() || cur == Some('\n'),
                        Look::WordBoundary => is_word(prev) != is_word(cur),
                        Look::NotWordBoundary => is_word(prev) == is_word(cur),
                    };
                    if ok {
                        stack.push(pc + 1);
                    }
                }
                Some(Inst::Class(_)) => list.push(pc),
                None => {}
            }
        }
        false
    }
}
