//! Clock, rate limits, grants, transactions, approvals and revocation. (Being written.)
