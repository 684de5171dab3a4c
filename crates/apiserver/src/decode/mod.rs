//! Decoding request bodies as their kinds' types: typed decoding with Go's
//! wording and the nesting bound (`typed`), and field validation
//! (`strict`: unknown and duplicate fields), numbers no Go decoder takes
//! (`numbers`). Every stage that reads a body
//! uses it; it depends on nothing but the Status errors.

pub mod numbers;
pub mod strict;
pub mod typed;
