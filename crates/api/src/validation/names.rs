//! Name checks with upstream's messages (k8s.io/apimachinery's
//! `validation.IsQualifiedName`, `IsValidLabelValue`, `IsDNS1123Label`,
//! `IsDNS1123Subdomain`, `IsDNS1035Label`). Each returns the list of
//! messages upstream would give, empty when the value is fine. The one
//! DNS-1123 checker every crate uses.

const QUALIFIED_NAME: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', \
and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', \
regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

const QUALIFIED_NAME_BARE: &str = "a qualified name must consist of alphanumeric characters, '-', '_' or '.', \
and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', \
regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain \
prefix and '/' (e.g. 'example.com/MyName')";

const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, \
'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  \
or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

const DNS1123_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters \
or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used \
for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex \
used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

const DNS1035_LABEL: &str =
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', \
start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or \
'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn qualified_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            alnum(f)
                && alnum(l)
                && b.iter()
                    .all(|&c| alnum(c) || c == b'-' || c == b'_' || c == b'.')
        }
        _ => false,
    }
}

fn dns_label_ok(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            (f.is_ascii_lowercase() || f.is_ascii_digit())
                && (l.is_ascii_lowercase() || l.is_ascii_digit())
                && b.iter()
                    .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        }
        _ => false,
    }
}

/// `IsQualifiedName`: label keys, annotation keys, finalizers.
pub fn qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            name
        }
        _ => return vec![QUALIFIED_NAME_BARE.to_string()],
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !qualified_part(name) {
        errs.push(QUALIFIED_NAME.to_string());
    }
    errs
}

/// `IsValidLabelValue`.
pub fn label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !qualified_part(value) {
        errs.push(LABEL_VALUE.to_string());
    }
    errs
}

/// `IsDNS1123Label`: namespace names, container names.
pub fn dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !dns_label_ok(value) {
        errs.push(DNS1123_LABEL.to_string());
    }
    errs
}

/// `IsDNS1123Subdomain`: most object names.
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if !value.split('.').all(dns_label_ok) {
        errs.push(DNS1123_SUBDOMAIN.to_string());
    }
    errs
}

/// `IsDNS1035Label`: service names.
pub fn dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !(dns_label_ok(value) && value.as_bytes().first().is_some_and(u8::is_ascii_lowercase)) {
        errs.push(DNS1035_LABEL.to_string());
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_answers() {
        assert!(qualified_name("app").is_empty());
        assert!(qualified_name("example.com/My_name.1").is_empty());
        assert_eq!(qualified_name("bad key!"), vec![QUALIFIED_NAME]);
        assert_eq!(qualified_name("bad/key/x"), vec![QUALIFIED_NAME_BARE]);
        assert_eq!(qualified_name("/x"), vec!["prefix part must be non-empty"]);
        assert_eq!(
            qualified_name("Ex.com/x"),
            vec![format!("prefix part {DNS1123_SUBDOMAIN}")]
        );
        assert_eq!(
            qualified_name(""),
            vec![
                "name part must be non-empty".to_string(),
                QUALIFIED_NAME.to_string()
            ]
        );
        assert!(label_value("").is_empty());
        assert_eq!(
            label_value(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        assert_eq!(label_value("-a"), vec![LABEL_VALUE]);
        assert!(dns1123_label("my-ns").is_empty());
        assert_eq!(dns1123_label("a.b"), vec![DNS1123_LABEL]);
        assert_eq!(
            dns1123_label(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        assert!(dns1123_subdomain("a.b").is_empty());
        assert!(dns1035_label("web").is_empty());
        assert_eq!(dns1035_label("1web"), vec![DNS1035_LABEL]);
    }
}
