//! Review warnings (placeholder).
