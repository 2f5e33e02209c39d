//! Copies of the library with some NVML functions missing, as an old driver's library lacks
//! the calls added after it.
//!
//! A real old `libnvidia-ml.so` simply does not export, say, `nvmlDeviceGetMemoryInfo_v2`:
//! `dlsym` finds nothing, and nvml-wrapper, which resolves every symbol when it loads the
//! library, keeps that failure and answers `NvmlError::FailedToLoadSymbol` when the function
//! is used. A scenario cannot produce that, since it is read at `nvmlInit`, after the symbols
//! were resolved. So the copy itself is changed: the first letter of each named symbol's entry
//! in the dynamic string table becomes `X`. `dlsym` compares names in that table, so the
//! function is not found by its name, exactly as in a library that never had it.

use std::io::{Error, ErrorKind, Result};
use std::path::Path;

/// `SHT_DYNSYM`: the section of the symbols the dynamic linker sees.
const SHT_DYNSYM: u32 = 11;
/// Bytes per `Elf64_Sym`.
const SYM_SIZE: usize = 24;

/// Functions the library needs to be a library at all: `nvmlInit_v2` is also referenced by
/// the library's own relocations (it finds its file through it), and no driver lacks these.
const KEPT: &[&str] = &[
    "nvmlInit_v2",
    "nvmlInit",
    "nvmlInitWithFlags",
    "nvmlShutdown",
    "nvmlErrorString",
];

/// Copies the library at `from` to `to` without the exported functions `names`.
///
/// Fails on a name that is not one of [`crate::EXPORTED_SYMBOLS`], on one of the init and
/// shutdown functions, and on a file that is not a 64-bit little-endian ELF with those
/// symbols.
pub fn copy_without_symbols(from: &Path, to: &Path, names: &[&str]) -> Result<()> {
    for name in names {
        if !crate::EXPORTED_SYMBOLS.contains(name) || KEPT.contains(name) {
            return Err(invalid(format!(
                "{name}: not a function this library can lack"
            )));
        }
    }
    let mut image = std::fs::read(from)?;
    hide(&mut image, names)?;
    std::fs::write(to, image)
}

/// Renames `names` in the dynamic string table of the ELF `image`.
fn hide(image: &mut [u8], names: &[&str]) -> Result<()> {
    if image.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return Err(invalid("not a 64-bit little-endian ELF file".into()));
    }
    let section_table = read_u64(image, 0x28)? as usize;
    let entry_size = usize::from(read_u16(image, 0x3A)?);
    let count = usize::from(read_u16(image, 0x3C)?);
    let section = |i: usize| section_table + i * entry_size;
    let dynsym = (0..count)
        .map(section)
        .find(|&at| read_u32(image, at + 4).is_ok_and(|kind| kind == SHT_DYNSYM))
        .ok_or_else(|| invalid("no dynamic symbol table".into()))?;
    let symbols = read_u64(image, dynsym + 0x18)? as usize;
    let symbols_len = read_u64(image, dynsym + 0x20)? as usize;
    let strings = section(read_u32(image, dynsym + 0x28)? as usize);
    let strings_at = read_u64(image, strings + 0x18)? as usize;
    let strings_len = read_u64(image, strings + 0x20)? as usize;
    let table = strings_at..strings_at + strings_len;

    let mut offsets = Vec::new();
    for name in names {
        let found = (0..symbols_len / SYM_SIZE)
            .map(|i| read_u32(image, symbols + i * SYM_SIZE).map(|o| strings_at + o as usize))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .find(|&at| name_at(image, at, &table) == Some(name.as_bytes()));
        offsets.push(found.ok_or_else(|| invalid(format!("{name}: not in the file")))?);
    }
    // The linker may share one string between a name and another that ends with it; changing
    // a first letter only touches names that end with the whole hidden name, and no NVML
    // function's name ends with another's.
    for at in offsets {
        image[at] = b'X';
    }
    Ok(())
}

/// The NUL-terminated name at `at`, within the string table `table`.
fn name_at<'a>(image: &'a [u8], at: usize, table: &std::ops::Range<usize>) -> Option<&'a [u8]> {
    let rest = image.get(at..table.end)?;
    let end = rest.iter().position(|&b| b == 0)?;
    Some(&rest[..end])
}

fn bytes<const N: usize>(image: &[u8], at: usize) -> Result<[u8; N]> {
    image
        .get(at..at + N)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| invalid(format!("truncated ELF file at {at}")))
}

fn read_u16(image: &[u8], at: usize) -> Result<u16> {
    bytes(image, at).map(u16::from_le_bytes)
}

fn read_u32(image: &[u8], at: usize) -> Result<u32> {
    bytes(image, at).map(u32::from_le_bytes)
}

fn read_u64(image: &[u8], at: usize) -> Result<u64> {
    bytes(image, at).map(u64::from_le_bytes)
}

fn invalid(text: String) -> Error {
    Error::new(ErrorKind::InvalidData, text)
}
