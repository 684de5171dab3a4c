//! Table printers (filled in next).
