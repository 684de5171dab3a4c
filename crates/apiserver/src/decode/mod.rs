//! Decoding request bodies as their kinds' types: typed decoding with Go's
//! wording and the nesting bound (`typed`), and field validation
//! (`strict`: unknown and duplicate fields). Every stage that reads a body
//! uses it; it depends on nothing but the Status errors.

pub mod strict;
pub mod typed;
