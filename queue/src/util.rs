//! Small helpers shared across the crate.

/// Aligns `T` to 128 bytes (two cache lines, as adjacent-line prefetch
/// pairs them), so a word written often does not share a line with words
/// read often.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> std::ops::DerefMut for CachePadded<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}
