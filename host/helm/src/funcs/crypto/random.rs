//! Randomness for keys, serials and IVs: the system's (`getrandom`, also on wasm32-wasip2) as
//! a `rand_core` generator. Owns: nothing else. Must not touch: what the bytes are for.

/// `crypto/rand.Reader` for RustCrypto: the OS generator through `getrandom`.
pub(super) struct SysRng;

impl rand_core::RngCore for SysRng {
    fn next_u32(&mut self) -> u32 {
        let mut b = [0u8; 4];
        self.fill_bytes(&mut b);
        u32::from_le_bytes(b)
    }
    fn next_u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.fill_bytes(&mut b);
        u64::from_le_bytes(b)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        getrandom::fill(dest).expect("the system random number generator failed");
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl rand_core::CryptoRng for SysRng {}

pub(super) fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    rand_core::RngCore::fill_bytes(&mut SysRng, &mut b);
    b
}
