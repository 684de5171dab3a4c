//! Label and field selectors (filled in next).
