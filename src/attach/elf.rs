//! Just enough ELF64 to find exported functions: the dynamic symbol table of a file and
//! the lowest address its loadable segments ask for (so a symbol's run-time address is the
//! mapping's base plus its value less that). The file is the target's: it is read as data,
//! bounds-checked at every step, and a malformed one is an error, never a panic.

use std::collections::HashMap;

const SHT_DYNSYM: u32 = 11;
const PT_LOAD: u32 = 1;

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}
fn usize_at(b: &[u8], off: usize) -> Option<usize> {
    usize::try_from(u64_at(b, off)?).ok()
}

/// The values of `wanted` defined in `file`'s dynamic symbol table, and the file's lowest
/// loadable virtual address (page-aligned).
pub fn lookup(file: &[u8], wanted: &[&str]) -> Result<(HashMap<String, u64>, u64), String> {
    parse(file, wanted).ok_or_else(|| "not a readable 64-bit little-endian ELF file".to_string())
}

fn parse(b: &[u8], wanted: &[&str]) -> Option<(HashMap<String, u64>, u64)> {
    if b.get(0..4)? != b"\x7fELF" || *b.get(4)? != 2 || *b.get(5)? != 1 {
        return None;
    }
    let phoff = usize_at(b, 0x20)?;
    let shoff = usize_at(b, 0x28)?;
    let phentsize = usize::from(u16_at(b, 0x36)?);
    let phnum = usize::from(u16_at(b, 0x38)?);
    let shentsize = usize::from(u16_at(b, 0x3A)?);
    let shnum = usize::from(u16_at(b, 0x3C)?);
    let mut min_vaddr = u64::MAX;
    for i in 0..phnum {
        let ph = phoff.checked_add(i.checked_mul(phentsize)?)?;
        if u32_at(b, ph)? == PT_LOAD {
            min_vaddr = min_vaddr.min(u64_at(b, ph + 0x10)?);
        }
    }
    if min_vaddr == u64::MAX {
        return None;
    }
    let mut found = HashMap::new();
    for i in 0..shnum {
        let sh = shoff.checked_add(i.checked_mul(shentsize)?)?;
        if u32_at(b, sh + 4)? != SHT_DYNSYM {
            continue;
        }
        let offset = usize_at(b, sh + 0x18)?;
        let size = usize_at(b, sh + 0x20)?;
        let link = usize::try_from(u32_at(b, sh + 0x28)?).ok()?;
        let entsize = usize_at(b, sh + 0x38)?.max(24);
        let strtab_sh = shoff.checked_add(link.checked_mul(shentsize)?)?;
        let str_off = usize_at(b, strtab_sh + 0x18)?;
        let str_size = usize_at(b, strtab_sh + 0x20)?;
        let strtab = b.get(str_off..str_off.checked_add(str_size)?)?;
        for n in 0..size / entsize {
            let sym = offset.checked_add(n.checked_mul(entsize)?)?;
            let name_off = usize::try_from(u32_at(b, sym)?).ok()?;
            let shndx = u16_at(b, sym + 6)?;
            let value = u64_at(b, sym + 8)?;
            if shndx == 0 || value == 0 {
                continue;
            }
            let Some(rest) = strtab.get(name_off..) else {
                continue;
            };
            let name = rest.split(|&c| c == 0).next().unwrap_or_default();
            if let Some(w) = wanted.iter().find(|w| w.as_bytes() == name) {
                found.entry((*w).to_string()).or_insert(value);
            }
        }
    }
    Some((found, min_vaddr & !0xfff))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_libc_mmap_in_this_machines_libc() {
        let path = [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
        ]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
        let Some(path) = path else {
            eprintln!("SKIPPED: no x86_64 glibc here");
            return;
        };
        let bytes = std::fs::read(path).unwrap();
        let (found, min) = lookup(&bytes, &["mmap", "no_such_symbol_here"]).unwrap();
        assert!(found["mmap"] > 0);
        assert!(!found.contains_key("no_such_symbol_here"));
        assert_eq!(min, 0);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(lookup(b"", &["x"]).is_err());
        assert!(lookup(b"\x7fELF\x02\x01", &["x"]).is_err());
        let mut b = vec![0u8; 64];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        b[0x20..0x28].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(lookup(&b, &["x"]).is_err());
    }
}
