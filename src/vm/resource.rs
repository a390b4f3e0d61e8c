//! Request resource normalisation and template matching. (Being written.)
