//! The JSONPath subset additionalPrinterColumns use (client-go jsonpath
//! behind `{<jsonPath>}`): `.a.b`, `['a.b']`, `[0]`, `[-1]`, `[*]`, `.*`,
//! slices `[1:3]`, recursive descent `..a` and filters
//! `[?(@.type=="Ready")]` (==, !=, <, <=, >, >= and existence). A column
//! shows the first result; [`column`] returns it.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Wildcard,
    Recursive,
    Index(i64),
    Slice(Option<i64>, Option<i64>),
    Filter(Filter),
}

#[derive(Debug, Clone, PartialEq)]
struct Filter {
    left: Vec<Step>,
    op: Option<(String, Literal)>,
}

#[derive(Debug, Clone, PartialEq)]
enum Literal {
    Str(String),
    Num(f64),
    Bool(bool),
    Null,
    Path(Vec<Step>),
}

/// The first value `json_path` selects in `obj`, if any.
pub(crate) fn column(obj: &Value, json_path: &str) -> Option<Value> {
    let steps = parse(json_path)?;
    eval(obj, &steps).into_iter().next().cloned()
}

/// Parses a printer-column path (upstream rejects what this refuses).
fn parse(path: &str) -> Option<Vec<Step>> {
    let p = path.trim();
    let p = p
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .unwrap_or(p);
    let p = p.strip_prefix('$').unwrap_or(p);
    let chars: Vec<char> = p.chars().collect();
    let mut pos = 0;
    let steps = parse_steps(&chars, &mut pos, false)?;
    (pos == chars.len()).then_some(steps)
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-' || c == '/'
}

fn parse_steps(c: &[char], pos: &mut usize, in_filter: bool) -> Option<Vec<Step>> {
    let mut steps = Vec::new();
    while let Some(&ch) = c.get(*pos) {
        match ch {
            '.' => {
                *pos += 1;
                if c.get(*pos) == Some(&'.') {
                    *pos += 1;
                    steps.push(Step::Recursive);
                }
                if c.get(*pos) == Some(&'*') {
                    *pos += 1;
                    steps.push(Step::Wildcard);
                    continue;
                }
                let start = *pos;
                while c.get(*pos).is_some_and(|&x| is_ident(x)) {
                    *pos += 1;
                }
                if *pos == start {
                    if c.get(*pos) == Some(&'[') {
                        continue;
                    }
                    // A lone "." selects the current value.
                    if c.get(*pos).is_none() && steps.is_empty() {
                        return Some(steps);
                    }
                    return None;
                }
                steps.push(Step::Field(c.get(start..*pos)?.iter().collect()));
            }
            '[' => {
                *pos += 1;
                steps.push(parse_bracket(c, pos)?);
            }
            _ if in_filter => break,
            _ => return None,
        }
    }
    Some(steps)
}

fn skip_ws(c: &[char], pos: &mut usize) {
    while c.get(*pos).is_some_and(|x| x.is_whitespace()) {
        *pos += 1;
    }
}

fn parse_quoted(c: &[char], pos: &mut usize) -> Option<String> {
    let q = *c.get(*pos)?;
    *pos += 1;
    let mut s = String::new();
    loop {
        let ch = *c.get(*pos)?;
        *pos += 1;
        if ch == q {
            return Some(s);
        }
        if ch == '\\' {
            s.push(*c.get(*pos)?);
            *pos += 1;
        } else {
            s.push(ch);
        }
    }
}

fn parse_int(c: &[char], pos: &mut usize) -> Option<i64> {
    skip_ws(c, pos);
    let start = *pos;
    if c.get(*pos) == Some(&'-') {
        *pos += 1;
    }
    while c.get(*pos).is_some_and(char::is_ascii_digit) {
        *pos += 1;
    }
    let s: String = c.get(start..*pos)?.iter().collect();
    skip_ws(c, pos);
    if s.is_empty() {
        None
    } else {
        s.parse().ok()
    }
}

fn expect(c: &[char], pos: &mut usize, ch: char) -> Option<()> {
    skip_ws(c, pos);
    (c.get(*pos) == Some(&ch)).then(|| *pos += 1)
}

fn parse_bracket(c: &[char], pos: &mut usize) -> Option<Step> {
    skip_ws(c, pos);
    match *c.get(*pos)? {
        '\'' | '"' => {
            let s = parse_quoted(c, pos)?;
            expect(c, pos, ']')?;
            Some(Step::Field(s))
        }
        '*' => {
            *pos += 1;
            expect(c, pos, ']')?;
            Some(Step::Wildcard)
        }
        '?' => {
            *pos += 1;
            expect(c, pos, '(')?;
            let f = parse_filter(c, pos)?;
            expect(c, pos, ')')?;
            expect(c, pos, ']')?;
            Some(Step::Filter(f))
        }
        _ => {
            let start = if c.get(*pos) == Some(&':') {
                None
            } else {
                Some(parse_int(c, pos)?)
            };
            if c.get(*pos) == Some(&':') {
                *pos += 1;
                skip_ws(c, pos);
                let end = if c.get(*pos) == Some(&']') {
                    None
                } else {
                    Some(parse_int(c, pos)?)
                };
                expect(c, pos, ']')?;
                return Some(Step::Slice(start, end));
            }
            expect(c, pos, ']')?;
            Some(Step::Index(start?))
        }
    }
}

fn parse_filter(c: &[char], pos: &mut usize) -> Option<Filter> {
    skip_ws(c, pos);
    expect(c, pos, '@')?;
    let left = parse_steps(c, pos, true)?;
    skip_ws(c, pos);
    let mut op = String::new();
    while c.get(*pos).is_some_and(|x| "=!<>".contains(*x)) {
        op.push(*c.get(*pos)?);
        *pos += 1;
    }
    if op.is_empty() {
        return Some(Filter { left, op: None });
    }
    if !["==", "!=", "<", "<=", ">", ">="].contains(&op.as_str()) {
        return None;
    }
    skip_ws(c, pos);
    let lit = match *c.get(*pos)? {
        '\'' | '"' => Literal::Str(parse_quoted(c, pos)?),
        '@' => {
            *pos += 1;
            Literal::Path(parse_steps(c, pos, true)?)
        }
        _ => {
            let start = *pos;
            while c.get(*pos).is_some_and(|x| !x.is_whitespace() && *x != ')') {
                *pos += 1;
            }
            let word: String = c.get(start..*pos)?.iter().collect();
            match word.as_str() {
                "true" => Literal::Bool(true),
                "false" => Literal::Bool(false),
                "nil" | "null" => Literal::Null,
                w => Literal::Num(w.parse().ok()?),
            }
        }
    };
    Some(Filter {
        left,
        op: Some((op, lit)),
    })
}

fn eval<'a>(obj: &'a Value, steps: &[Step]) -> Vec<&'a Value> {
    let mut cur = vec![obj];
    for step in steps {
        let mut next = Vec::new();
        for v in cur {
            apply(v, step, &mut next);
        }
        cur = next;
    }
    cur
}

fn children(v: &Value) -> Vec<&Value> {
    match v {
        Value::Object(m) => m.values().collect(),
        Value::Array(a) => a.iter().collect(),
        _ => Vec::new(),
    }
}

fn descend<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    out.push(v);
    for c in children(v) {
        descend(c, out);
    }
}

fn norm(i: i64, len: usize) -> i64 {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    if i < 0 {
        (i + len).max(0)
    } else {
        i.min(len)
    }
}

fn apply<'a>(v: &'a Value, step: &Step, out: &mut Vec<&'a Value>) {
    match step {
        Step::Field(name) => {
            if let Some(x) = v.get(name.as_str()) {
                out.push(x);
            }
        }
        Step::Wildcard => out.extend(children(v)),
        Step::Recursive => descend(v, out),
        Step::Index(i) => {
            if let Value::Array(a) = v {
                let len = i64::try_from(a.len()).unwrap_or(i64::MAX);
                let at = if *i < 0 { i + len } else { *i };
                if let Some(x) = usize::try_from(at).ok().and_then(|at| a.get(at)) {
                    out.push(x);
                }
            }
        }
        Step::Slice(s, e) => {
            if let Value::Array(a) = v {
                let start = norm(s.unwrap_or(0), a.len());
                let end = norm(e.unwrap_or(i64::MAX), a.len());
                let (Ok(start), Ok(end)) = (usize::try_from(start), usize::try_from(end)) else {
                    return;
                };
                if start < end {
                    out.extend(a.get(start..end).unwrap_or_default());
                }
            }
        }
        Step::Filter(f) => {
            let items: Vec<&Value> = match v {
                Value::Array(a) => a.iter().collect(),
                other => vec![other],
            };
            for item in items {
                if matches(item, f) {
                    out.push(item);
                }
            }
        }
    }
}

fn matches(item: &Value, f: &Filter) -> bool {
    let left = eval(item, &f.left);
    let Some((op, lit)) = &f.op else {
        return !left.is_empty();
    };
    let right: Value = match lit {
        Literal::Str(s) => Value::String(s.clone()),
        Literal::Num(n) => serde_json::Number::from_f64(*n).map_or(Value::Null, Value::Number),
        Literal::Bool(b) => Value::Bool(*b),
        Literal::Null => Value::Null,
        Literal::Path(p) => match eval(item, p).first() {
            Some(v) => (*v).clone(),
            None => return false,
        },
    };
    left.iter().any(|l| compare(l, op, &right))
}

fn compare(l: &Value, op: &str, r: &Value) -> bool {
    use std::cmp::Ordering;
    let ord = match (l, r) {
        (Value::Number(a), Value::Number(b)) => a.as_f64().partial_cmp(&b.as_f64()),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        _ => {
            if l == r {
                Some(Ordering::Equal)
            } else {
                None
            }
        }
    };
    match op {
        "==" => ord == Some(Ordering::Equal),
        "!=" => ord != Some(Ordering::Equal),
        "<" => ord == Some(Ordering::Less),
        "<=" => matches!(ord, Some(Ordering::Less | Ordering::Equal)),
        ">" => ord == Some(Ordering::Greater),
        ">=" => matches!(ord, Some(Ordering::Greater | Ordering::Equal)),
        _ => false,
    }
}

/// Whether a column path parses (crd validation's `must be a simple json
/// path` is separate; this only says the evaluator understands it).
#[allow(dead_code)]
pub(crate) fn parses(path: &str) -> bool {
    parse(path).is_some()
}
