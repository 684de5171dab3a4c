//! Label and field selectors: parsing, validation and matching.
//!
//! This module owns the `?labelSelector=` and `?fieldSelector=` query
//! languages of the Kubernetes API, with the semantics and error wording of
//! upstream apimachinery (`pkg/labels/selector.go`, `pkg/fields/selector.go`,
//! `pkg/util/validation`):
//!
//! * [`LabelSelector`] parses the set-based label selector syntax
//!   (`=`, `==`, `!=`, `in (..)`, `notin (..)`, `key`, `!key`, plus the
//!   upstream `>`/`<` integer comparisons), validates keys and values, and
//!   matches label maps. [`LabelSelector::from_json`] converts a
//!   `metav1.LabelSelector` object (`matchLabels` / `matchExpressions`) into
//!   the same type, for controllers and the scheduler.
//! * [`FieldSelector`] parses `field=value`, `field==value` and
//!   `field!=value` terms joined by `,`, with `\,`, `\=` and `\\` escapes in
//!   values, and matches through a caller-supplied field getter;
//!   [`field_value`] is the plain dotted-path getter over a JSON object.
//!
//! Objects are `serde_json::Value`s in wire form; nothing here does I/O.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt;

use serde_json::{Map, Value};

/// Errors from parsing or converting a selector. Messages follow upstream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A single label requirement failed to parse or validate
    /// (upstream: `unable to parse requirement: ...`).
    #[error("unable to parse requirement: {0}")]
    Requirement(String),
    /// The label selector's structure around requirements is wrong
    /// (upstream: `found ',', expected: ...`).
    #[error("{0}")]
    Syntax(String),
    /// A requirement built from a `metav1.LabelSelector` is invalid
    /// (upstream `NewRequirement` errors, e.g. `key: Invalid value: ...`).
    #[error("{0}")]
    InvalidRequirement(String),
    /// A `matchExpressions` operator other than In, NotIn, Exists, DoesNotExist.
    #[error("{} is not a valid label selector operator", go_quote(.0))]
    UnknownOperator(String),
    /// A `metav1.LabelSelector` JSON object of the wrong shape.
    #[error("invalid label selector: {0}")]
    Malformed(String),
    /// A field selector term without a recognised operator.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    FieldTerm {
        /// The whole selector as given.
        selector: String,
        /// The offending comma-separated term.
        term: String,
    },
    /// A backslash in a field selector value not followed by `\`, `,` or `=`.
    #[error("invalid field selector: invalid escape sequence: {0}")]
    InvalidEscape(String),
    /// A bare `,` or `=` inside a field selector value.
    #[error("invalid field selector: unescaped character in value: {0}")]
    UnescapedChar(char),
}

/// Quote a string the way Go's `%q` does for ordinary input.
fn go_quote(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

// ---------------------------------------------------------------------------
// Validation (pkg/util/validation), with upstream wording.
// ---------------------------------------------------------------------------

/// Upstream `IsQualifiedName`: the problems with a label key, if any
/// (the one implementation lives in `validation::names`).
fn qualified_name_errors(value: &str) -> Vec<String> {
    crate::validation::names::qualified_name(value)
}

/// Upstream `IsValidLabelValue`.
fn label_value_errors(value: &str) -> Vec<String> {
    crate::validation::names::label_value(value)
}

fn invalid(path: &str, bad_value: &str, detail: &str) -> String {
    if path.is_empty() {
        format!("Invalid value: {}: {detail}", go_quote(bad_value))
    } else {
        format!("{path}: Invalid value: {}: {detail}", go_quote(bad_value))
    }
}

/// `field.Invalid` with a list value, rendered as JSON like upstream.
fn invalid_list(path: &str, values: &[String], detail: &str) -> String {
    let rendered = Value::from(values.to_vec()).to_string();
    format!("{path}: Invalid value: {rendered}: {detail}")
}

/// `ErrorList.ToAggregate().Error()`: one message as is, several in brackets.
fn aggregate(mut errs: Vec<String>) -> String {
    let mut seen = BTreeSet::new();
    errs.retain(|e| seen.insert(e.clone()));
    if errs.len() == 1 {
        errs.remove(0)
    } else {
        format!("[{}]", errs.join(", "))
    }
}

/// Whether `key` is a valid label key (optional DNS subdomain prefix and `/`,
/// then a name of at most 63 characters).
pub fn is_valid_label_key(key: &str) -> bool {
    qualified_name_errors(key).is_empty()
}

/// Whether `value` is a valid label value (empty, or at most 63 characters
/// of `[-_.A-Za-z0-9]` starting and ending with an alphanumeric).
pub fn is_valid_label_value(value: &str) -> bool {
    label_value_errors(value).is_empty()
}

// ---------------------------------------------------------------------------
// Label selectors
// ---------------------------------------------------------------------------

/// A label requirement operator (upstream `selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LabelOp {
    /// `key in (a,b)`: the key exists with one of the values.
    In,
    /// `key notin (a,b)`: the key is absent or has none of the values.
    NotIn,
    /// `key=a`.
    Equals,
    /// `key==a`, same meaning as `=`.
    DoubleEquals,
    /// `key!=a`: the key is absent or differs.
    NotEquals,
    /// `key`: the key exists.
    Exists,
    /// `!key`: the key does not exist.
    DoesNotExist,
    /// `key>1`: the key exists with an integer value greater than the operand.
    GreaterThan,
    /// `key<1`: the key exists with an integer value less than the operand.
    LessThan,
}

impl LabelOp {
    /// The upstream `selection.Operator` string (`in`, `notin`, `=`, `==`,
    /// `!=`, `exists`, `!`, `gt`, `lt`).
    pub fn as_str(self) -> &'static str {
        match self {
            LabelOp::In => "in",
            LabelOp::NotIn => "notin",
            LabelOp::Equals => "=",
            LabelOp::DoubleEquals => "==",
            LabelOp::NotEquals => "!=",
            LabelOp::Exists => "exists",
            LabelOp::DoesNotExist => "!",
            LabelOp::GreaterThan => "gt",
            LabelOp::LessThan => "lt",
        }
    }
}

/// One `key operator values` term of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    op: LabelOp,
    values: Vec<String>,
}

/// Upstream `NewRequirement` checks; `key_path` prefixes the key error.
fn requirement_errors(key: &str, op: LabelOp, values: &[String], key_path: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let key_errs = qualified_name_errors(key);
    if !key_errs.is_empty() {
        errs.push(invalid(key_path, key, &key_errs.join("; ")));
    }
    match op {
        LabelOp::In | LabelOp::NotIn => {
            if values.is_empty() {
                errs.push(invalid_list(
                    "values",
                    values,
                    "for 'in', 'notin' operators, values set can't be empty",
                ));
            }
        }
        LabelOp::Equals | LabelOp::DoubleEquals | LabelOp::NotEquals => {
            if values.len() != 1 {
                errs.push(invalid_list(
                    "values",
                    values,
                    "exact-match compatibility requires one single value",
                ));
            }
        }
        LabelOp::Exists | LabelOp::DoesNotExist => {
            if !values.is_empty() {
                errs.push(invalid_list(
                    "values",
                    values,
                    "values set must be empty for exists and does not exist",
                ));
            }
        }
        LabelOp::GreaterThan | LabelOp::LessThan => {
            if values.len() != 1 {
                errs.push(invalid_list(
                    "values",
                    values,
                    "for 'Gt', 'Lt' operators, exactly one value is required",
                ));
            }
            for (i, v) in values.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    errs.push(invalid(
                        &format!("values[{i}]"),
                        v,
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    ));
                }
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        let value_errs = label_value_errors(v);
        if !value_errs.is_empty() {
            errs.push(invalid(
                &format!("values[{i}][{key}]"),
                v,
                &value_errs.join("; "),
            ));
        }
    }
    errs
}

/// The string form of a label value (labels are strings; anything else is
/// rendered as JSON).
fn label_str(v: &Value) -> Cow<'_, str> {
    match v {
        Value::String(s) => Cow::Borrowed(s.as_str()),
        other => Cow::Owned(other.to_string()),
    }
}

impl Requirement {
    /// Build and validate a requirement (upstream `NewRequirement`): In and
    /// NotIn need at least one value, the equality operators exactly one,
    /// Exists and DoesNotExist none, Gt and Lt one integer; the key and every
    /// value must be valid.
    pub fn new(
        key: impl Into<String>,
        op: LabelOp,
        values: Vec<String>,
    ) -> Result<Requirement, SelectorError> {
        let key = key.into();
        let errs = requirement_errors(&key, op, &values, "key");
        if errs.is_empty() {
            Ok(Requirement { key, op, values })
        } else {
            Err(SelectorError::InvalidRequirement(aggregate(errs)))
        }
    }

    /// A requirement taken as given, without checking key or values
    /// (upstream `SelectorFromSet` does not validate either).
    pub fn new_unchecked(key: impl Into<String>, op: LabelOp, values: Vec<String>) -> Requirement {
        Requirement {
            key: key.into(),
            op,
            values,
        }
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn op(&self) -> LabelOp {
        self.op
    }

    /// The values (empty for Exists and DoesNotExist).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    fn has_value(&self, v: &str) -> bool {
        self.values.iter().any(|x| x == v)
    }

    /// Whether `labels` satisfies this requirement. NotIn, `!=` and
    /// DoesNotExist match when the key is absent; In, `=`, `==`, Exists, Gt
    /// and Lt need it present.
    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        self.matches_by(|key| labels.get(key).map(label_str))
    }

    /// [`Requirement::matches`] with the labels behind a lookup: `get`
    /// returns the value of a label key, `None` when absent.
    pub fn matches_by<'a>(&self, get: impl Fn(&str) -> Option<Cow<'a, str>>) -> bool {
        let got = get(&self.key);
        match self.op {
            LabelOp::In | LabelOp::Equals | LabelOp::DoubleEquals => {
                got.is_some_and(|v| self.has_value(&v))
            }
            LabelOp::NotIn | LabelOp::NotEquals => got.is_none_or(|v| !self.has_value(&v)),
            LabelOp::Exists => got.is_some(),
            LabelOp::DoesNotExist => got.is_none(),
            LabelOp::GreaterThan | LabelOp::LessThan => {
                let (Some(got), [want]) = (got, self.values.as_slice()) else {
                    return false;
                };
                let (Ok(got), Ok(want)) = (got.parse::<i64>(), want.parse::<i64>()) else {
                    return false;
                };
                if self.op == LabelOp::GreaterThan {
                    got > want
                } else {
                    got < want
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    /// Upstream `Requirement.String()`: `!k`, `k`, `k=v`, `k in (a,b)`, ...
    /// with set values sorted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.op {
            LabelOp::DoesNotExist => return write!(f, "!{}", self.key),
            LabelOp::Exists => return f.write_str(&self.key),
            LabelOp::Equals => "=",
            LabelOp::DoubleEquals => "==",
            LabelOp::NotEquals => "!=",
            LabelOp::GreaterThan => ">",
            LabelOp::LessThan => "<",
            LabelOp::In => " in ",
            LabelOp::NotIn => " notin ",
        };
        let mut values: Vec<&str> = self.values.iter().map(String::as_str).collect();
        values.sort_unstable();
        let joined = values.join(",");
        match self.op {
            LabelOp::In | LabelOp::NotIn => write!(f, "{}{op}({joined})", self.key),
            _ => write!(f, "{}{op}{joined}", self.key),
        }
    }
}

/// A parsed label selector: the AND of its requirements, sorted by key.
///
/// The default value is the empty selector, which matches everything;
/// [`LabelSelector::nothing`] matches no object (upstream `labels.Nothing()`,
/// what a null `metav1.LabelSelector` converts to).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    End,
    OpenPar,
    ClosedPar,
    Comma,
    DoesNotExist,
    Equals,
    DoubleEquals,
    NotEquals,
    GreaterThan,
    LessThan,
    In,
    NotIn,
    Identifier,
}

fn is_selector_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Upstream `Lexer`: whitespace separates tokens; runs of non-special,
/// non-blank bytes are identifiers (or the keywords `in` / `notin`).
#[expect(
    clippy::indexing_slicing,
    reason = "every index is checked against the length first, and slices end at ASCII bytes"
)]
fn lex(s: &str) -> Vec<(Tok, &str)> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < b.len() && is_selector_whitespace(b[i]) {
            i += 1;
        }
        if i == b.len() {
            out.push((Tok::End, ""));
            return out;
        }
        let start = i;
        if is_special_symbol(b[i]) {
            let two = b.get(i..i + 2);
            let tok = if two == Some(b"!=") {
                i += 2;
                Tok::NotEquals
            } else if two == Some(b"==") {
                i += 2;
                Tok::DoubleEquals
            } else {
                i += 1;
                match b[start] {
                    b'=' => Tok::Equals,
                    b'!' => Tok::DoesNotExist,
                    b'(' => Tok::OpenPar,
                    b')' => Tok::ClosedPar,
                    b',' => Tok::Comma,
                    b'>' => Tok::GreaterThan,
                    _ => Tok::LessThan,
                }
            };
            out.push((tok, &s[start..i]));
        } else {
            while i < b.len() && !is_special_symbol(b[i]) && !is_selector_whitespace(b[i]) {
                i += 1;
            }
            let lit = &s[start..i];
            let tok = match lit {
                "in" => Tok::In,
                "notin" => Tok::NotIn,
                _ => Tok::Identifier,
            };
            out.push((tok, lit));
        }
    }
}

/// In the `Values` context the keywords `in` and `notin` are identifiers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    KeyAndOperator,
    Values,
}

struct Parser<'a> {
    items: Vec<(Tok, &'a str)>,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self, ctx: Ctx) -> (Tok, &'a str) {
        let (tok, lit) = self
            .items
            .get(self.pos)
            .or(self.items.last())
            .copied()
            .unwrap_or((Tok::End, ""));
        match tok {
            Tok::In | Tok::NotIn if ctx == Ctx::Values => (Tok::Identifier, lit),
            _ => (tok, lit),
        }
    }

    fn next(&mut self, ctx: Ctx) -> (Tok, &'a str) {
        let item = self.peek(ctx);
        if self.pos < self.items.len() - 1 {
            self.pos += 1;
        }
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut requirements = Vec::new();
        loop {
            let (tok, lit) = self.peek(Ctx::Values);
            match tok {
                Tok::Identifier | Tok::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(SelectorError::Requirement)?;
                    requirements.push(r);
                    let (t, l) = self.next(Ctx::Values);
                    match t {
                        Tok::End => return Ok(requirements),
                        Tok::Comma => {
                            let (t2, l2) = self.peek(Ctx::Values);
                            if t2 != Tok::Identifier && t2 != Tok::DoesNotExist {
                                return Err(SelectorError::Syntax(format!(
                                    "found '{l2}', expected: identifier after ','"
                                )));
                            }
                        }
                        _ => {
                            return Err(SelectorError::Syntax(format!(
                                "found '{l}', expected: ',' or 'end of string'"
                            )))
                        }
                    }
                }
                Tok::End => return Ok(requirements),
                _ => {
                    return Err(SelectorError::Syntax(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    )))
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, inferred) = self.parse_key_and_infer_operator()?;
        let (op, values) = match inferred {
            Some(op) => (op, Vec::new()),
            None => {
                let op = self.parse_operator()?;
                let values = match op {
                    LabelOp::In | LabelOp::NotIn => self.parse_values()?,
                    _ => vec![self.parse_exact_value()?],
                };
                (op, values)
            }
        };
        let errs = requirement_errors(key, op, &values, "");
        if errs.is_empty() {
            Ok(Requirement {
                key: key.to_owned(),
                op,
                values,
            })
        } else {
            Err(aggregate(errs))
        }
    }

    /// Reads `[!] KEY`; infers Exists / DoesNotExist when no operator follows.
    fn parse_key_and_infer_operator(&mut self) -> Result<(&'a str, Option<LabelOp>), String> {
        let mut op = None;
        let (mut tok, mut lit) = self.next(Ctx::Values);
        if tok == Tok::DoesNotExist {
            op = Some(LabelOp::DoesNotExist);
            (tok, lit) = self.next(Ctx::Values);
        }
        if tok != Tok::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let key_errs = qualified_name_errors(lit);
        if !key_errs.is_empty() {
            return Err(invalid("", lit, &key_errs.join("; ")));
        }
        if matches!(self.peek(Ctx::Values).0, Tok::End | Tok::Comma) && op.is_none() {
            op = Some(LabelOp::Exists);
        }
        Ok((lit, op))
    }

    fn parse_operator(&mut self) -> Result<LabelOp, String> {
        let (tok, lit) = self.next(Ctx::KeyAndOperator);
        Ok(match tok {
            Tok::In => LabelOp::In,
            Tok::Equals => LabelOp::Equals,
            Tok::DoubleEquals => LabelOp::DoubleEquals,
            Tok::GreaterThan => LabelOp::GreaterThan,
            Tok::LessThan => LabelOp::LessThan,
            Tok::NotIn => LabelOp::NotIn,
            Tok::NotEquals => LabelOp::NotEquals,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ))
            }
        })
    }

    /// `( values )`; the result is a sorted set, `()` meaning `{""}`.
    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.next(Ctx::Values);
        if tok != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.peek(Ctx::Values);
        match tok {
            Tok::Identifier | Tok::Comma => {
                let set = self.parse_identifiers_list()?;
                let (tok, lit) = self.next(Ctx::Values);
                if tok != Tok::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(set.into_iter().collect())
            }
            Tok::ClosedPar => {
                self.next(Ctx::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    /// A possibly empty list of possibly empty comma-separated identifiers,
    /// stopping before the closing parenthesis.
    fn parse_identifiers_list(&mut self) -> Result<BTreeSet<String>, String> {
        let mut set = BTreeSet::new();
        loop {
            let (tok, lit) = self.next(Ctx::Values);
            match tok {
                Tok::Identifier => {
                    set.insert(lit.to_owned());
                    let (tok2, lit2) = self.peek(Ctx::Values);
                    match tok2 {
                        Tok::Comma => continue,
                        Tok::ClosedPar => return Ok(set),
                        _ => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    if set.is_empty() {
                        set.insert(String::new()); // "(,"
                    }
                    match self.peek(Ctx::Values).0 {
                        Tok::ClosedPar => {
                            set.insert(String::new()); // ",)"
                            return Ok(set);
                        }
                        Tok::Comma => {
                            self.next(Ctx::Values);
                            set.insert(String::new()); // ",,"
                        }
                        _ => {}
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    /// The single value after `=`, `==`, `!=`, `>` or `<` (possibly empty).
    fn parse_exact_value(&mut self) -> Result<String, String> {
        if matches!(self.peek(Ctx::Values).0, Tok::End | Tok::Comma) {
            return Ok(String::new());
        }
        let (tok, lit) = self.next(Ctx::Values);
        if tok == Tok::Identifier {
            Ok(lit.to_owned())
        } else {
            Err(format!("found '{lit}', expected: identifier"))
        }
    }
}

impl LabelSelector {
    /// The selector matching every object (same as the empty string).
    pub fn everything() -> LabelSelector {
        LabelSelector::default()
    }

    /// The selector matching no object (upstream `labels.Nothing()`).
    pub fn nothing() -> LabelSelector {
        LabelSelector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Parse the `?labelSelector=` string form (upstream `labels.Parse`).
    ///
    /// ```text
    /// <selector>    ::= <requirement> | <requirement> "," <selector>
    /// <requirement> ::= [!] KEY [ ("in"|"notin") "(" VALUES ")" | ("="|"=="|"!="|">"|"<") VALUE ]
    /// ```
    /// Blanks (space, tab, CR, LF) may surround any token.
    pub fn parse(s: &str) -> Result<LabelSelector, SelectorError> {
        let mut parser = Parser {
            items: lex(s),
            pos: 0,
        };
        let mut requirements = parser.parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// Convert a `metav1.LabelSelector` JSON object (upstream
    /// `LabelSelectorAsSelector`). `null` gives [`LabelSelector::nothing`];
    /// an object with no `matchLabels` and no `matchExpressions` matches
    /// everything. `matchLabels` entries become `=` requirements and
    /// `matchExpressions` accept the operators In, NotIn, Exists and
    /// DoesNotExist.
    pub fn from_json(selector: &Value) -> Result<LabelSelector, SelectorError> {
        let obj = match selector {
            Value::Null => return Ok(LabelSelector::nothing()),
            Value::Object(obj) => obj,
            other => {
                return Err(SelectorError::Malformed(format!(
                    "expected an object, got {other}"
                )))
            }
        };
        let mut requirements = Vec::new();
        match obj.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(labels)) => {
                for (k, v) in labels {
                    let Value::String(v) = v else {
                        return Err(SelectorError::Malformed(format!(
                            "matchLabels[{k}]: expected a string, got {v}"
                        )));
                    };
                    requirements.push(Requirement::new(
                        k.as_str(),
                        LabelOp::Equals,
                        vec![v.clone()],
                    )?);
                }
            }
            Some(other) => {
                return Err(SelectorError::Malformed(format!(
                    "matchLabels: expected an object, got {other}"
                )))
            }
        }
        let expressions: &[Value] = match obj.get("matchExpressions") {
            None | Some(Value::Null) => &[],
            Some(Value::Array(items)) => items,
            Some(other) => {
                return Err(SelectorError::Malformed(format!(
                    "matchExpressions: expected an array, got {other}"
                )))
            }
        };
        for (i, expr) in expressions.iter().enumerate() {
            let Value::Object(expr) = expr else {
                return Err(SelectorError::Malformed(format!(
                    "matchExpressions[{i}]: expected an object, got {expr}"
                )));
            };
            let string_field = |name: &str| -> Result<&str, SelectorError> {
                match expr.get(name) {
                    None | Some(Value::Null) => Ok(""),
                    Some(Value::String(s)) => Ok(s),
                    Some(other) => Err(SelectorError::Malformed(format!(
                        "matchExpressions[{i}].{name}: expected a string, got {other}"
                    ))),
                }
            };
            let key = string_field("key")?;
            let operator = string_field("operator")?;
            let op = match operator {
                "In" => LabelOp::In,
                "NotIn" => LabelOp::NotIn,
                "Exists" => LabelOp::Exists,
                "DoesNotExist" => LabelOp::DoesNotExist,
                other => return Err(SelectorError::UnknownOperator(other.to_owned())),
            };
            let values = match expr.get("values") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(vals)) => vals
                    .iter()
                    .enumerate()
                    .map(|(j, v)| match v {
                        Value::String(s) => Ok(s.clone()),
                        other => Err(SelectorError::Malformed(format!(
                            "matchExpressions[{i}].values[{j}]: expected a string, got {other}"
                        ))),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                Some(other) => {
                    return Err(SelectorError::Malformed(format!(
                        "matchExpressions[{i}].values: expected an array, got {other}"
                    )))
                }
            };
            requirements.push(Requirement::new(key, op, values)?);
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// A selector requiring each `key=value` of a plain label map, such as a
    /// Service's `spec.selector` (upstream `SelectorFromSet`; not validated).
    /// An empty map matches everything.
    pub fn from_match_labels(labels: &Map<String, Value>) -> LabelSelector {
        let mut requirements: Vec<Requirement> = labels
            .iter()
            .map(|(k, v)| Requirement {
                key: k.clone(),
                op: LabelOp::Equals,
                values: vec![label_str(v).into_owned()],
            })
            .collect();
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        LabelSelector {
            requirements,
            nothing: false,
        }
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// True when the selector does not restrict anything (matches everything).
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// True for [`LabelSelector::nothing`].
    pub fn is_nothing(&self) -> bool {
        self.nothing
    }

    /// Whether an object with these labels (`metadata.labels`, string
    /// values) is selected: every requirement must match.
    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        self.matches_by(|key| labels.get(key).map(label_str))
    }

    /// [`LabelSelector::matches`] with the labels behind a lookup: `get`
    /// returns the value of a label key, `None` when absent.
    pub fn matches_by<'a>(&self, get: impl Fn(&str) -> Option<Cow<'a, str>>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches_by(&get))
    }

    /// Whether an object is selected, reading its `metadata.labels`
    /// (absent labels count as an empty map).
    pub fn matches_object(&self, obj: &Value) -> bool {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        let labels = obj
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .unwrap_or_else(|| EMPTY.get_or_init(Map::new));
        self.matches(labels)
    }

    /// The value `label` must have, when the first requirement on it is
    /// `=`, `==` or a one-value `in` (upstream `RequiresExactMatch`).
    pub fn requires_exact_match(&self, label: &str) -> Option<&str> {
        let r = self.requirements.iter().find(|r| r.key == label)?;
        match (r.op, r.values.as_slice()) {
            (LabelOp::Equals | LabelOp::DoubleEquals | LabelOp::In, [v]) => Some(v),
            _ => None,
        }
    }
}

impl fmt::Display for LabelSelector {
    /// The canonical string form (requirements joined by `,`); empty for
    /// both the everything and the nothing selector, as upstream.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Field selectors
// ---------------------------------------------------------------------------

/// A field selector operator. `==` parses as [`FieldOp::Equals`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldOp {
    /// `field=value` or `field==value`.
    Equals,
    /// `field!=value`.
    NotEquals,
}

impl FieldOp {
    /// `=` or `!=`.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldOp::Equals => "=",
            FieldOp::NotEquals => "!=",
        }
    }
}

/// One `field op value` term of a field selector; `value` is unescaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The field path, e.g. `metadata.name`.
    pub field: String,
    /// The comparison.
    pub op: FieldOp,
    /// The literal (unescaped) value.
    pub value: String,
}

/// A parsed field selector: the AND of its terms. The default (and the
/// empty string) matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldRequirement>,
}

/// Escape `\`, `,` and `=` in a literal so it can be a field selector value
/// (upstream `fields.EscapeValue`).
pub fn escape_field_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Undo [`escape_field_value`]; bare `,`/`=` and unknown escapes are errors
/// (upstream `fields.UnescapeValue`).
pub fn unescape_field_value(s: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(SelectorError::InvalidEscape(format!("\\{c}")));
            }
            out.push(c);
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => return Err(SelectorError::UnescapedChar(c)),
            _ => out.push(c),
        }
    }
    if in_slash {
        return Err(SelectorError::InvalidEscape("\\".to_owned()));
    }
    Ok(out)
}

/// Split on commas not preceded by a backslash (escapes kept in the terms).
fn split_field_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// Split a term at the first operator; `!=` and `==` win over `=` at the
/// same position. The field part has no escaping.
fn split_field_term(term: &str) -> Option<(&str, FieldOp, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op_str, op) in [
            ("!=", FieldOp::NotEquals),
            ("==", FieldOp::Equals),
            ("=", FieldOp::Equals),
        ] {
            if let Some(rhs) = rest.strip_prefix(op_str) {
                return Some((&term[..i], op, rhs));
            }
        }
    }
    None
}

impl FieldSelector {
    /// The selector matching every object.
    pub fn everything() -> FieldSelector {
        FieldSelector::default()
    }

    /// Parse the `?fieldSelector=` string form (upstream
    /// `fields.ParseSelector`): comma-separated `field=value`,
    /// `field==value` or `field!=value` terms, values escaped with
    /// `\,`, `\=`, `\\`. Empty terms are skipped; terms are kept sorted by
    /// their source text; no whitespace is trimmed.
    pub fn parse(s: &str) -> Result<FieldSelector, SelectorError> {
        let mut parts = split_field_terms(s);
        parts.sort_unstable();
        let mut terms = Vec::with_capacity(parts.len());
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let (field, op, rhs) =
                split_field_term(part).ok_or_else(|| SelectorError::FieldTerm {
                    selector: s.to_owned(),
                    term: part.to_owned(),
                })?;
            terms.push(FieldRequirement {
                field: field.to_owned(),
                op,
                value: unescape_field_value(rhs)?,
            });
        }
        Ok(FieldSelector { terms })
    }

    /// A one-term `field=value` selector (upstream `OneTermEqualSelector`).
    pub fn one_term_equal(field: &str, value: &str) -> FieldSelector {
        FieldSelector {
            terms: vec![FieldRequirement {
                field: field.to_owned(),
                op: FieldOp::Equals,
                value: value.to_owned(),
            }],
        }
    }

    /// The terms.
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.terms
    }

    /// The terms as `(field, op, unescaped value)`.
    pub fn fields(&self) -> impl Iterator<Item = (&str, FieldOp, &str)> + '_ {
        self.terms
            .iter()
            .map(|t| (t.field.as_str(), t.op, t.value.as_str()))
    }

    /// True when the selector does not restrict anything.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether an object is selected; `get` returns the object's value for a
    /// field path, and a missing field compares as the empty string.
    pub fn matches<'a>(&self, get: impl Fn(&str) -> Option<Cow<'a, str>>) -> bool {
        self.terms.iter().all(|t| {
            let got = get(&t.field).unwrap_or_default();
            match t.op {
                FieldOp::Equals => *got == *t.value,
                FieldOp::NotEquals => *got != *t.value,
            }
        })
    }

    /// [`FieldSelector::matches`] with [`field_value`] over a JSON object.
    pub fn matches_object(&self, obj: &Value) -> bool {
        self.matches(|path| field_value(obj, path).map(Cow::Owned))
    }

    /// The value `field` must equal, from its first `=`/`==` term
    /// (upstream `RequiresExactMatch`).
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.field == field && t.op == FieldOp::Equals)
            .map(|t| t.value.as_str())
    }

    /// The name required by a `metadata.name=<x>` term, to narrow a list or
    /// watch to one object.
    pub fn exact_name(&self) -> Option<&str> {
        self.requires_exact_match("metadata.name")
    }
}

impl fmt::Display for FieldSelector {
    /// The canonical string form: `field=value` / `field!=value` terms with
    /// escaped values, joined by `,`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(
                f,
                "{}{}{}",
                t.field,
                t.op.as_str(),
                escape_field_value(&t.value)
            )?;
        }
        Ok(())
    }
}

/// Read a dotted field path (`metadata.name`, `spec.nodeName`,
/// `involvedObject.uid`, ...) from a JSON object. Strings are returned as
/// is, numbers and booleans in their JSON text; a missing path, `null`, an
/// object or an array gives `None`.
pub fn field_value(obj: &Value, path: &str) -> Option<String> {
    let mut cur = obj;
    for segment in path.split('.') {
        cur = cur.as_object()?.get(segment)?;
    }
    match cur {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null | Value::Object(_) | Value::Array(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            other => panic!("not an object: {other}"),
        }
    }

    const NAME_PART_REGEX: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const VALUE_REGEX: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

    #[test]
    fn label_parse_canonical_forms() {
        let cases: &[(&str, &str)] = &[
            ("", ""),
            ("   ", ""),
            ("x=a", "x=a"),
            ("x==a", "x==a"),
            ("x!=a", "x!=a"),
            ("x in (b,a)", "x in (a,b)"),
            ("x in (a,a)", "x in (a)"),
            ("x notin (a)", "x notin (a)"),
            ("x", "x"),
            ("!x", "!x"),
            ("! x", "!x"),
            ("x>1", "x>1"),
            ("x<10", "x<10"),
            ("x=", "x="),
            ("x=,y", "x=,y"),
            ("x in ()", "x in ()"),
            ("x in (,)", "x in ()"),
            ("x in (a,,b)", "x in (,a,b)"),
            ("x in (a,)", "x in (,a)"),
            ("x in (,a)", "x in (,a)"),
            ("  x  =  a  ,  y  ", "x=a,y"),
            ("\tx\n!=\r\na", "x!=a"),
            ("x in(a , b)", "x in (a,b)"),
            ("z,a,m=1", "a,m=1,z"),
            ("example.com/app=web", "example.com/app=web"),
            ("in in (in,notin)", "in in (in,notin)"),
            ("notin=in", "notin=in"),
            ("A_b.c-D=Z_y.x-W", "A_b.c-D=Z_y.x-W"),
        ];
        for (input, want) in cases {
            let sel = LabelSelector::parse(input)
                .unwrap_or_else(|e| panic!("parse {input:?} failed: {e}"));
            assert_eq!(sel.to_string(), *want, "input {input:?}");
        }
    }

    #[test]
    fn label_parse_operators() {
        let cases: &[(&str, LabelOp, &[&str])] = &[
            ("k=v", LabelOp::Equals, &["v"]),
            ("k==v", LabelOp::DoubleEquals, &["v"]),
            ("k!=v", LabelOp::NotEquals, &["v"]),
            ("k in (v,w)", LabelOp::In, &["v", "w"]),
            ("k notin (v)", LabelOp::NotIn, &["v"]),
            ("k", LabelOp::Exists, &[]),
            ("!k", LabelOp::DoesNotExist, &[]),
            ("k>5", LabelOp::GreaterThan, &["5"]),
            ("k<5", LabelOp::LessThan, &["5"]),
        ];
        for (input, op, values) in cases {
            let sel = LabelSelector::parse(input).unwrap();
            let [r] = sel.requirements() else {
                panic!("{input:?}: expected one requirement");
            };
            assert_eq!(r.key(), "k", "{input:?}");
            assert_eq!(r.op(), *op, "{input:?}");
            assert_eq!(r.values(), *values, "{input:?}");
        }
    }

    #[test]
    fn label_parse_errors() {
        let long_name = "a".repeat(64);
        let long_value = "v".repeat(64);
        let cases: Vec<(String, String)> = vec![
            ("x=a b".into(), "found 'b', expected: ',' or 'end of string'".into()),
            ("x,".into(), "found '', expected: identifier after ','".into()),
            ("x,,y".into(), "found ',', expected: identifier after ','".into()),
            ("=a".into(), "found '=', expected: !, identifier, or 'end of string'".into()),
            (",x".into(), "found ',', expected: !, identifier, or 'end of string'".into()),
            ("!".into(), "unable to parse requirement: found '', expected: identifier".into()),
            ("!!x".into(), "unable to parse requirement: found '!', expected: identifier".into()),
            ("!x=a".into(), "found '=', expected: ',' or 'end of string'".into()),
            (
                "x y".into(),
                "unable to parse requirement: found 'y', expected: in, notin, =, ==, !=, gt, lt".into(),
            ),
            (
                // `xin` is one identifier, so `(` is where an operator belongs
                "xin(a)".into(),
                "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt".into(),
            ),
            ("x in a".into(), "unable to parse requirement: found 'a' expected: '('".into()),
            ("x in".into(), "unable to parse requirement: found '' expected: '('".into()),
            ("x in (a".into(), "unable to parse requirement: found '', expected: ',' or ')'".into()),
            ("x in (a b)".into(), "unable to parse requirement: found 'b', expected: ',' or ')'".into()),
            (
                "x in (=)".into(),
                "unable to parse requirement: found '=', expected: ',', ')' or identifier".into(),
            ),
            (
                "x in (a,=)".into(),
                "unable to parse requirement: found '=', expected: ',', or identifier".into(),
            ),
            ("x===a".into(), "unable to parse requirement: found '=', expected: identifier".into()),
            ("x=(a)".into(), "unable to parse requirement: found '(', expected: identifier".into()),
            (
                "x>a".into(),
                "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer".into(),
            ),
            (
                "-x".into(),
                format!("unable to parse requirement: Invalid value: \"-x\": {NAME_PART_REGEX}"),
            ),
            (
                "x_=a".into(),
                format!("unable to parse requirement: Invalid value: \"x_\": {NAME_PART_REGEX}"),
            ),
            (
                "a/b/c".into(),
                "unable to parse requirement: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".into(),
            ),
            (
                "/x".into(),
                "unable to parse requirement: Invalid value: \"/x\": prefix part must be non-empty".into(),
            ),
            (
                "x/".into(),
                format!("unable to parse requirement: Invalid value: \"x/\": name part must be non-empty; {NAME_PART_REGEX}"),
            ),
            (
                "Example.com/x".into(),
                "unable to parse requirement: Invalid value: \"Example.com/x\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into(),
            ),
            (
                format!("{long_name}=a"),
                format!("unable to parse requirement: Invalid value: \"{long_name}\": name part must be no more than 63 characters"),
            ),
            (
                "x=-a".into(),
                format!("unable to parse requirement: values[0][x]: Invalid value: \"-a\": {VALUE_REGEX}"),
            ),
            (
                format!("x={long_value}"),
                format!("unable to parse requirement: values[0][x]: Invalid value: \"{long_value}\": must be no more than 63 characters"),
            ),
            (
                format!("x={long_value}_"),
                format!("unable to parse requirement: values[0][x]: Invalid value: \"{long_value}_\": must be no more than 63 characters; {VALUE_REGEX}"),
            ),
            (
                // set values are sorted, so "-b" is values[0]
                "x in (a,-b)".into(),
                format!("unable to parse requirement: values[0][x]: Invalid value: \"-b\": {VALUE_REGEX}"),
            ),
            (
                "x in (a_,b_)".into(),
                format!("unable to parse requirement: [values[0][x]: Invalid value: \"a_\": {VALUE_REGEX}, values[1][x]: Invalid value: \"b_\": {VALUE_REGEX}]"),
            ),
            (
                "x=é".into(),
                format!("unable to parse requirement: values[0][x]: Invalid value: \"é\": {VALUE_REGEX}"),
            ),
        ];
        for (input, want) in cases {
            match LabelSelector::parse(&input) {
                Ok(sel) => panic!("{input:?} parsed as {sel}"),
                Err(e) => assert_eq!(e.to_string(), want, "input {input:?}"),
            }
        }
        assert!(matches!(
            LabelSelector::parse("-x"),
            Err(SelectorError::Requirement(_))
        ));
        assert!(matches!(
            LabelSelector::parse("x,"),
            Err(SelectorError::Syntax(_))
        ));
    }

    #[test]
    fn label_key_and_value_validation() {
        let max_name = "n".repeat(63);
        let long_prefix = format!("{}.com/x", "a".repeat(250));
        let keys: Vec<(String, bool)> = vec![
            ("a".into(), true),
            ("a1".into(), true),
            ("A-b_c.D".into(), true),
            (max_name.clone(), true),
            (format!("{max_name}n"), false),
            ("k8s.io/name".into(), true),
            ("a-b.c/x".into(), true),
            ("-a".into(), false),
            ("a-".into(), false),
            (".a".into(), false),
            ("".into(), false),
            ("a b".into(), false),
            ("a/b/c".into(), false),
            ("UPPER.io/x".into(), false),
            ("a..b/x".into(), false),
            ("-a.io/x".into(), false),
            ("a_b.io/x".into(), false),
            (long_prefix, false),
        ];
        for (key, ok) in &keys {
            assert_eq!(is_valid_label_key(key), *ok, "key {key:?}");
        }
        let values: Vec<(String, bool)> = vec![
            ("".into(), true),
            ("a".into(), true),
            ("a.b-c_D".into(), true),
            ("v".repeat(63), true),
            ("v".repeat(64), false),
            ("-a".into(), false),
            ("a_".into(), false),
            ("a/b".into(), false),
            ("a b".into(), false),
        ];
        for (value, ok) in &values {
            assert_eq!(is_valid_label_value(value), *ok, "value {value:?}");
        }
    }

    #[test]
    fn label_matching() {
        let cases: &[(&str, Value, bool)] = &[
            ("", json!({}), true),
            ("", json!({"a": "b"}), true),
            ("x=a", json!({"x": "a"}), true),
            ("x=a", json!({"x": "b"}), false),
            ("x=a", json!({}), false),
            ("x==a", json!({"x": "a"}), true),
            ("x==a", json!({"x": "b"}), false),
            ("x!=a", json!({"x": "b"}), true),
            ("x!=a", json!({"x": "a"}), false),
            ("x!=a", json!({}), true), // missing key matches !=
            ("x in (a,b)", json!({"x": "b"}), true),
            ("x in (a,b)", json!({"x": "c"}), false),
            ("x in (a,b)", json!({}), false),
            ("x notin (a,b)", json!({"x": "c"}), true),
            ("x notin (a,b)", json!({"x": "a"}), false),
            ("x notin (a,b)", json!({}), true), // missing key matches notin
            ("x", json!({"x": ""}), true),
            ("x", json!({"y": "a"}), false),
            ("!x", json!({"y": "a"}), true),
            ("!x", json!({"x": "a"}), false),
            ("x=", json!({"x": ""}), true),
            ("x=", json!({}), false),
            ("x in ()", json!({"x": ""}), true),
            ("x in ()", json!({"x": "a"}), false),
            ("x>5", json!({"x": "6"}), true),
            ("x>5", json!({"x": "5"}), false),
            ("x>5", json!({"x": "six"}), false),
            ("x>5", json!({}), false),
            ("x<5", json!({"x": "-1"}), true),
            ("x<5", json!({"x": "5"}), false),
            ("x=a,y", json!({"x": "a", "y": "z"}), true),
            ("x=a,y", json!({"x": "a"}), false),
            ("x=a,!y", json!({"x": "a"}), true),
            (
                "app in (web,api),tier!=db",
                json!({"app": "api", "tier": "fe"}),
                true,
            ),
            (
                "app in (web,api),tier!=db",
                json!({"app": "api", "tier": "db"}),
                false,
            ),
        ];
        for (sel, lbls, want) in cases {
            let parsed = LabelSelector::parse(sel).unwrap();
            assert_eq!(
                parsed.matches(&labels(lbls.clone())),
                *want,
                "selector {sel:?} labels {lbls}"
            );
        }
    }

    #[test]
    fn label_everything_nothing_and_object() {
        assert!(LabelSelector::everything().is_empty());
        assert!(LabelSelector::parse("").unwrap().is_empty());
        assert!(LabelSelector::everything().matches(&Map::new()));
        assert!(!LabelSelector::nothing().matches(&Map::new()));
        assert!(!LabelSelector::nothing().is_empty());
        assert!(LabelSelector::nothing().is_nothing());
        let sel = LabelSelector::parse("app=web").unwrap();
        assert!(sel.matches_object(&json!({"metadata": {"labels": {"app": "web"}}})));
        assert!(!sel.matches_object(&json!({"metadata": {"name": "x"}})));
        assert!(LabelSelector::parse("!app")
            .unwrap()
            .matches_object(&json!({"metadata": {}})));
    }

    #[test]
    fn label_requires_exact_match() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("app=web", "app", Some("web")),
            ("app==web", "app", Some("web")),
            ("app in (web)", "app", Some("web")),
            ("app in (web,api)", "app", None),
            ("app!=web", "app", None),
            ("app", "app", None),
            ("tier=fe", "app", None),
        ];
        for (sel, label, want) in cases {
            let parsed = LabelSelector::parse(sel).unwrap();
            assert_eq!(parsed.requires_exact_match(label), *want, "{sel:?}");
        }
    }

    #[test]
    fn label_from_json() {
        let cases: &[(Value, &str)] = &[
            (json!({}), ""),
            (json!({"matchLabels": {}, "matchExpressions": []}), ""),
            (json!({"matchLabels": null}), ""),
            (json!({"matchLabels": {"b": "2", "a": "1"}}), "a=1,b=2"),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "In", "values": ["b", "a"]}]}),
                "x in (a,b)",
            ),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "NotIn", "values": ["a"]}]}),
                "x notin (a)",
            ),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "Exists"}]}),
                "x",
            ),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "DoesNotExist", "values": []}]}),
                "!x",
            ),
            (
                json!({
                    "matchLabels": {"z": "1"},
                    "matchExpressions": [{"key": "a", "operator": "Exists"}]
                }),
                "a,z=1",
            ),
        ];
        for (input, want) in cases {
            let sel = LabelSelector::from_json(input)
                .unwrap_or_else(|e| panic!("from_json {input} failed: {e}"));
            assert_eq!(sel.to_string(), *want, "input {input}");
            assert!(!sel.is_nothing());
        }

        let sel = LabelSelector::from_json(&Value::Null).unwrap();
        assert!(sel.is_nothing());
        assert!(!sel.matches(&Map::new()));

        let sel = LabelSelector::from_json(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "NotIn", "values": ["db"]},
                {"key": "env", "operator": "In", "values": ["prod", "stage"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "team", "operator": "Exists"}
            ]
        }))
        .unwrap();
        let matching: &[(Value, bool)] = &[
            (json!({"app": "web", "env": "prod", "team": "a"}), true),
            (
                json!({"app": "web", "env": "prod", "team": "a", "tier": "fe"}),
                true,
            ),
            (
                json!({"app": "web", "env": "prod", "team": "a", "tier": "db"}),
                false,
            ),
            (json!({"app": "web", "env": "dev", "team": "a"}), false),
            (json!({"app": "web", "env": "prod"}), false),
            (
                json!({"app": "web", "env": "prod", "team": "a", "canary": "y"}),
                false,
            ),
            (json!({"app": "api", "env": "prod", "team": "a"}), false),
        ];
        for (lbls, want) in matching {
            assert_eq!(sel.matches(&labels(lbls.clone())), *want, "labels {lbls}");
        }
    }

    #[test]
    fn label_from_json_errors() {
        let cases: &[(Value, &str)] = &[
            (
                json!({"matchExpressions": [{"key": "x", "operator": "Gt", "values": ["1"]}]}),
                "\"Gt\" is not a valid label selector operator",
            ),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "in", "values": ["a"]}]}),
                "\"in\" is not a valid label selector operator",
            ),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "In"}]}),
                "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty",
            ),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "NotIn", "values": []}]}),
                "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty",
            ),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "Exists", "values": ["a"]}]}),
                "values: Invalid value: [\"a\"]: values set must be empty for exists and does not exist",
            ),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "DoesNotExist", "values": ["a"]}]}),
                "values: Invalid value: [\"a\"]: values set must be empty for exists and does not exist",
            ),
            (
                json!({"matchLabels": {"-x": "a"}}),
                "key: Invalid value: \"-x\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ),
            (
                json!({"matchLabels": {"x": "a b"}}),
                "values[0][x]: Invalid value: \"a b\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ),
            (
                json!({"matchExpressions": [{"operator": "Exists"}]}),
                "key: Invalid value: \"\": name part must be non-empty; name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ),
            (json!("app=web"), "invalid label selector: expected an object, got \"app=web\""),
            (
                json!({"matchLabels": {"x": 1}}),
                "invalid label selector: matchLabels[x]: expected a string, got 1",
            ),
            (
                json!({"matchLabels": []}),
                "invalid label selector: matchLabels: expected an object, got []",
            ),
            (
                json!({"matchExpressions": {}}),
                "invalid label selector: matchExpressions: expected an array, got {}",
            ),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "In", "values": [1]}]}),
                "invalid label selector: matchExpressions[0].values[0]: expected a string, got 1",
            ),
        ];
        for (input, want) in cases {
            match LabelSelector::from_json(input) {
                Ok(sel) => panic!("{input} converted to {sel}"),
                Err(e) => assert_eq!(e.to_string(), *want, "input {input}"),
            }
        }
    }

    #[test]
    fn requirement_new() {
        assert!(Requirement::new("x", LabelOp::Equals, vec!["a".into()]).is_ok());
        let err = Requirement::new("x", LabelOp::Equals, vec![]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "values: Invalid value: []: exact-match compatibility requires one single value"
        );
        let err =
            Requirement::new("x", LabelOp::GreaterThan, vec!["1".into(), "2".into()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "values: Invalid value: [\"1\",\"2\"]: for 'Gt', 'Lt' operators, exactly one value is required"
        );
    }

    #[test]
    fn from_match_labels() {
        let sel = LabelSelector::from_match_labels(&labels(json!({"b": "2", "a": "1"})));
        assert_eq!(sel.to_string(), "a=1,b=2");
        assert!(sel.matches(&labels(json!({"a": "1", "b": "2", "c": "3"}))));
        assert!(!sel.matches(&labels(json!({"a": "1"}))));
        assert!(LabelSelector::from_match_labels(&Map::new()).matches(&Map::new()));
    }

    #[test]
    fn field_parse() {
        // (input, expected terms, canonical string)
        type Term<'a> = (&'a str, FieldOp, &'a str);
        let cases: &[(&str, &[Term], &str)] = &[
            ("", &[], ""),
            (",", &[], ""),
            (
                "metadata.name=foo",
                &[("metadata.name", FieldOp::Equals, "foo")],
                "metadata.name=foo",
            ),
            (
                "metadata.name==foo",
                &[("metadata.name", FieldOp::Equals, "foo")],
                "metadata.name=foo",
            ),
            (
                "status.phase!=Running",
                &[("status.phase", FieldOp::NotEquals, "Running")],
                "status.phase!=Running",
            ),
            ("a=", &[("a", FieldOp::Equals, "")], "a="),
            ("a!=", &[("a", FieldOp::NotEquals, "")], "a!="),
            (
                "spec.nodeName=n1,metadata.namespace!=kube-system",
                &[
                    ("metadata.namespace", FieldOp::NotEquals, "kube-system"),
                    ("spec.nodeName", FieldOp::Equals, "n1"),
                ],
                "metadata.namespace!=kube-system,spec.nodeName=n1",
            ),
            (
                "a=b,,c=d",
                &[("a", FieldOp::Equals, "b"), ("c", FieldOp::Equals, "d")],
                "a=b,c=d",
            ),
            // escaping
            (r"a=x\,y", &[("a", FieldOp::Equals, "x,y")], r"a=x\,y"),
            (r"a=x\=y", &[("a", FieldOp::Equals, "x=y")], r"a=x\=y"),
            (r"a=x\\y", &[("a", FieldOp::Equals, r"x\y")], r"a=x\\y"),
            (
                r"a=x\\,b=y",
                &[("a", FieldOp::Equals, r"x\"), ("b", FieldOp::Equals, "y")],
                r"a=x\\,b=y",
            ),
            (
                r"a!=\,\=\\",
                &[("a", FieldOp::NotEquals, r",=\")],
                r"a!=\,\=\\",
            ),
            // no whitespace trimming (upstream)
            (" a = b", &[(" a ", FieldOp::Equals, " b")], " a = b"),
            // the first operator splits; `!=` wins over `=` at the same spot
            ("a!b=c", &[("a!b", FieldOp::Equals, "c")], "a!b=c"),
        ];
        for (input, want, canonical) in cases {
            let sel = FieldSelector::parse(input)
                .unwrap_or_else(|e| panic!("parse {input:?} failed: {e}"));
            let got: Vec<_> = sel.fields().collect();
            assert_eq!(got, *want, "input {input:?}");
            assert_eq!(sel.to_string(), *canonical, "input {input:?}");
            assert_eq!(
                FieldSelector::parse(&sel.to_string()).unwrap(),
                sel,
                "round trip {input:?}"
            );
        }
    }

    #[test]
    fn field_parse_errors() {
        let cases: &[(&str, &str)] = &[
            ("a", "invalid selector: 'a'; can't understand 'a'"),
            (
                "metadata.name=x,bogus",
                "invalid selector: 'metadata.name=x,bogus'; can't understand 'bogus'",
            ),
            ("a<b", "invalid selector: 'a<b'; can't understand 'a<b'"),
            (
                "a in (b)",
                "invalid selector: 'a in (b)'; can't understand 'a in (b)'",
            ),
            (
                r"a=b\x",
                r"invalid field selector: invalid escape sequence: \x",
            ),
            (
                r"a=b\",
                r"invalid field selector: invalid escape sequence: \",
            ),
            (
                "a=b=c",
                "invalid field selector: unescaped character in value: =",
            ),
            (
                "a===b",
                "invalid field selector: unescaped character in value: =",
            ),
            // `!=` splits first, leaving a bare `=` in the value
            (
                "a!==b",
                "invalid field selector: unescaped character in value: =",
            ),
        ];
        for (input, want) in cases {
            match FieldSelector::parse(input) {
                Ok(sel) => panic!("{input:?} parsed as {sel}"),
                Err(e) => assert_eq!(e.to_string(), *want, "input {input:?}"),
            }
        }
    }

    #[test]
    fn field_matching() {
        let pod = json!({
            "metadata": {"name": "web-1", "namespace": "default", "uid": "u1"},
            "spec": {"nodeName": "n1", "replicas": 3, "hostNetwork": false},
            "status": {"phase": "Running"}
        });
        let cases: &[(&str, bool)] = &[
            ("", true),
            ("metadata.name=web-1", true),
            ("metadata.name==web-1", true),
            ("metadata.name=web-2", false),
            ("metadata.name!=web-2", true),
            ("metadata.name!=web-1", false),
            ("spec.nodeName=n1,status.phase=Running", true),
            ("spec.nodeName=n1,status.phase!=Running", false),
            // missing fields compare as ""
            ("spec.schedulerName=", true),
            ("spec.schedulerName!=", false),
            ("spec.schedulerName!=default", true),
            ("spec.schedulerName=default", false),
            ("spec.replicas=3", true),
            ("spec.hostNetwork=false", true),
        ];
        for (sel, want) in cases {
            let parsed = FieldSelector::parse(sel).unwrap();
            assert_eq!(parsed.matches_object(&pod), *want, "selector {sel:?}");
            assert_eq!(
                parsed.matches(|p| field_value(&pod, p).map(Cow::Owned)),
                *want,
                "selector {sel:?}"
            );
        }
        let escaped = FieldSelector::parse(r"metadata.name=a\,b").unwrap();
        assert!(escaped.matches(|p| (p == "metadata.name").then_some(Cow::Borrowed("a,b"))));
        assert!(!escaped.matches(|_| None));
    }

    #[test]
    fn field_exact_name() {
        let cases: &[(&str, Option<&str>)] = &[
            ("metadata.name=foo", Some("foo")),
            ("metadata.name==foo", Some("foo")),
            ("metadata.namespace=ns,metadata.name=foo", Some("foo")),
            ("metadata.name!=foo", None),
            ("metadata.namespace=foo", None),
            (r"metadata.name=a\=b", Some("a=b")),
            ("", None),
        ];
        for (sel, want) in cases {
            let parsed = FieldSelector::parse(sel).unwrap();
            assert_eq!(parsed.exact_name(), *want, "selector {sel:?}");
        }
        assert_eq!(
            FieldSelector::one_term_equal("metadata.name", "x").exact_name(),
            Some("x")
        );
        assert_eq!(
            FieldSelector::parse("spec.nodeName=n1")
                .unwrap()
                .requires_exact_match("spec.nodeName"),
            Some("n1")
        );
    }

    #[test]
    fn field_value_lookup() {
        let obj = json!({
            "metadata": {"name": "e1", "labels": {"a": "b"}},
            "involvedObject": {"uid": "abc", "kind": "Pod"},
            "count": 4,
            "ratio": 0.5,
            "spec": {"unschedulable": true, "nodeName": null, "list": [1]},
            "status": {"phase": "Pending"}
        });
        let cases: &[(&str, Option<&str>)] = &[
            ("metadata.name", Some("e1")),
            ("involvedObject.uid", Some("abc")),
            ("status.phase", Some("Pending")),
            ("count", Some("4")),
            ("ratio", Some("0.5")),
            ("spec.unschedulable", Some("true")),
            ("spec.nodeName", None),
            ("spec.list", None),
            ("metadata.labels", None),
            ("metadata.missing", None),
            ("status.phase.deeper", None),
            ("", None),
        ];
        for (path, want) in cases {
            assert_eq!(field_value(&obj, path).as_deref(), *want, "path {path:?}");
        }
    }

    #[test]
    fn escape_roundtrip() {
        for s in ["", "plain", "a,b", "a=b", r"a\b", r",=\\,="] {
            let escaped = escape_field_value(s);
            assert_eq!(unescape_field_value(&escaped).unwrap(), s, "{s:?}");
        }
        assert_eq!(escape_field_value(r"a,b=c\d"), r"a\,b\=c\\d");
    }
}
