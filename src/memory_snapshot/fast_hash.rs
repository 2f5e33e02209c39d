//! The hasher of the reader's interning maps (frames, stacks, memo ids out of order): a
//! multiply-and-rotate over each word, as rustc's own maps use. The keys are the file's
//! own values, so a hostile file could pick ones that collide; what that costs is bounded
//! by the reader's limits (a few hundred thousand keys) and its deadline, while SipHash,
//! the default, was a twentieth of reading a 100,000-entry snapshot.

use std::hash::{BuildHasherDefault, Hasher};

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

#[derive(Default, Clone, Copy)]
pub(crate) struct WordHasher(u64);

impl WordHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 56));
    }
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A `HashMap` with the word hasher.
pub(crate) type WordMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<WordHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hash;

    fn hash_of(v: impl Hash) -> u64 {
        let mut h = WordHasher::default();
        v.hash(&mut h);
        h.finish()
    }

    #[test]
    fn different_keys_hash_apart_and_equal_keys_alike() {
        assert_eq!(hash_of([1u32, 2, 3]), hash_of([1u32, 2, 3]));
        assert_ne!(hash_of([1u32, 2, 3]), hash_of([3u32, 2, 1]));
        assert_ne!(hash_of("layer1.py"), hash_of("layer1.pz"));
        // Trailing zero bytes and a shorter string are told apart by the length word.
        assert_ne!(hash_of(b"ab\0".as_slice()), hash_of(b"ab".as_slice()));
        let mut map: WordMap<Box<[u32]>, u32> = WordMap::default();
        for i in 0..1000u32 {
            map.insert(vec![i, i + 1].into(), i);
        }
        assert_eq!(map.len(), 1000);
        assert_eq!(map.get([7u32, 8].as_slice()), Some(&7));
    }
}
